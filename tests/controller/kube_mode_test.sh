#!/usr/bin/env bash
# `kmodd-controller run --kubernetes` against a real kube-apiserver (tools/kube) with
# simulated agents (kmodd-loadgen) for kubelet-less Node objects: Module status (a node with
# an untolerated NoExecute taint is not counted), the KMM node labels and KMM's Events, the
# finalizer on delete (and how long after the agents' unload report the labels go), a GKE
# node (kernel 6.1.90+) labelled ready, a label the API server refuses holding back no
# other, `kmodd-controller status` on the status file, an invalid Module (no webhook here)
# rejected in its status and never held by the finalizer, nor holding back the other
# Modules when the controller restarts while it exists, a missing pull Secret reported on
# its Module until it is created, one whose content no node could use reported (and sent to
# none) until it is fixed, an API server restart with watch expiry (410 Gone: the
# controller relists and sees a Module deleted and one created while it was not watching;
# leader failover: kube_failover_test.sh).
# As deployed: the controller with its service account's token and only what deploy/ grants
# it (as_deployed.sh: kmm-demo given for pull secrets, kmm-other not, whose Module says so),
# over TLS with the self-managed certificates, each simulated agent showing a token bound to
# a Pod on its node (the Kubernetes mode refuses --insecure).
# Without the harness (tools/kube/setup) it fails, never skips.
#
# usage: kube_mode_test.sh BIN_DIR SOURCE_DIR
set -euo pipefail

bin=$1
src=$2
fail() { echo "FAIL: $*" >&2; for f in "$dir"/*.log; do echo "--- $f" >&2; tail -n 30 "$f" >&2; done; exit 1; }
step() { echo "== $*"; }
# shellcheck source=tests/lib/harness.bash
source "$src/tests/lib/harness.bash"
# shellcheck source=tests/lib/kube.bash
source "$src/tests/lib/kube.bash"
declare dir
make_temp_dir dir kmodd-kube-mode KEEP

kube_start "$dir/kube"
k() { kube_admin "$@"; }  # as_deployed.sh uses it too
# shellcheck source=tests/controller/as_deployed.sh
source "$src/tests/controller/as_deployed.sh"

node_info() { kube_node_info "$1" "$2" "$3" sim; }  # NODE KERNEL BOOT

step "CRD, namespaces, Nodes: sim-0..2, sim-3 (a worker tainted NoExecute), gke-0"
kube_crd_install
k create namespace kmodd-system >/dev/null
k create namespace kmm-demo >/dev/null
for i in 0 1 2; do
  role=worker; [[ $i == 2 ]] && role=infra
  k create -f - >/dev/null <<YAML
apiVersion: v1
kind: Node
metadata:
  name: sim-$i
  labels: {kubernetes.io/hostname: sim-$i, role: $role}
YAML
  node_info "sim-$i" 6.1.0-27-cloud-amd64 "boot-$i"
done
# A worker no Module tolerates (nodesMatchingSelectorNumber leaves it out, as KMM does), and
# a GKE-shaped node, whose kernel release ends in "+" (no valid label value).
k create -f - >/dev/null <<YAML
apiVersion: v1
kind: Node
metadata:
  name: sim-3
  labels: {kubernetes.io/hostname: sim-3, role: worker}
spec:
  taints: [{key: dedicated, value: database, effect: NoExecute}]
---
apiVersion: v1
kind: Node
metadata:
  name: gke-0
  labels: {kubernetes.io/hostname: gke-0, role: gke, cloud.google.com/gke-os-distribution: cos}
YAML
node_info sim-3 6.1.0-27-cloud-amd64 boot-3
node_info gke-0 6.1.90+ boot-gke

# Each simulated agent's credential, as the DaemonSet's projected token: audience kmodd,
# bound to a Pod (never run: no kubelet) on its node.
as_deployed "$src" "$dir/controller.kubeconfig" kmm-demo || fail "cannot set up deploy/'s RBAC and policy"
mkdir -p "$dir/tokens"
for n in sim-0 sim-1 sim-2 sim-3 gke-0; do
  kube_agent_token "$n" kmodd-system "$dir/tokens/$n"
done

# start_controller and start_agents set NAME_pid (NAME with _ for -) for the tests below.
declare ctl_a_pid agents_a_pid
start_controller() {  # NAME [extra flags...]
  local name=$1; shift
  POD_NAME=$name "$bin/kmodd-controller" run --kubernetes --kubeconfig "$dir/controller.kubeconfig" \
    --namespace kmodd-system --listen 127.0.0.1:0 --cert-ip 127.0.0.1 --log-level debug "$@" \
    2>"$dir/$name.log" &
  pids+=($!)
  eval "${name//-/_}_pid=$!"
  eventually 20 grep -q '"controller running (Kubernetes)"' "$dir/$name.log" || fail "$name did not start"
  # The CA it published (ConfigMap kmodd-ca), as the agents mount it.
  k -n kmodd-system get configmap kmodd-ca -o jsonpath='{.data.ca\.crt}' >"$dir/ca.crt"
  [[ -s $dir/ca.crt ]] || fail "$name published no CA"
}
port_of() { grep -o '"sync server listening".*' "$dir/$1.log" | grep -o '"port":[1-9][0-9]*' | head -1 | cut -d: -f2; }
start_agents() {  # NAME PORT [N PREFIX KERNEL]
  "$bin/kmodd-loadgen" --controller "127.0.0.1:$2" --agents "${3:-3}" --name-prefix "${4:-sim-}" \
    --ca "$dir/ca.crt" --token-dir "$dir/tokens" --kernel "${5:-6.1.0-27-cloud-amd64}" >"$dir/$1.log" 2>&1 &
  pids+=($!)
  eval "${1//-/_}_pid=$!"
}
module() {  # NAME [ROLE [REGEXP [SPEC_LINE]]]: a Module for the nodes with that role
  local regexp=${3:-'^.+$'}
  k apply -f - >/dev/null <<YAML
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: $1, namespace: kmm-demo}
spec:
  selector: {role: ${2:-worker}}
  ${4:-}
  moduleLoader:
    container:
      modprobe: {moduleName: kmm_ci_a}
      kernelMappings:
        - {regexp: '$regexp', containerImage: '127.0.0.1:5000/kmm-ci-a:\$KERNEL_FULL_VERSION'}
YAML
}
cond() {  # MODULE TYPE FIELD: a field of one of the Module's status conditions
  k get module -n kmm-demo "$1" -o jsonpath="{.status.conditions[?(@.type==\"$2\")].$3}"
}
cond_is() { [[ $(cond "$1" "$2" status) == "$3" ]]; }

step "the admission policy on the controller's writes: a cordon only with its mark, an uncordon only of a marked node"
ctl() { kubectl --kubeconfig "$dir/controller.kubeconfig" "$@"; }
ctl patch node sim-2 --type merge -p '{"spec":{"unschedulable":true}}' >/dev/null 2>"$dir/cordon.err" &&
  fail "the controller's account cordoned a node without the kmodd.io/cordoned-for mark"
grep -q "only marking it kmodd.io/cordoned-for" "$dir/cordon.err" || { cat "$dir/cordon.err"; fail "the unmarked cordon was refused for another reason"; }
ctl patch node sim-2 --type merge \
  -p '{"spec":{"unschedulable":true},"metadata":{"annotations":{"kmodd.io/cordoned-for":"kmm-demo/kmm-ci"}}}' >/dev/null ||
  fail "the controller's account could not cordon a node with its mark (a drain)"
ctl patch node sim-2 --type merge -p '{"metadata":{"annotations":{"someone":"else"}}}' >/dev/null 2>&1 &&
  fail "the controller's account set another annotation on a node"
ctl patch node sim-2 --type merge -p '{"spec":{"podCIDR":"10.9.0.0/24"}}' >/dev/null 2>&1 &&
  fail "the controller's account changed another field of a node's spec"
ctl patch node sim-2 --type merge \
  -p '{"spec":{"unschedulable":null},"metadata":{"annotations":{"kmodd.io/cordoned-for":null}}}' >/dev/null ||
  fail "the controller's account could not uncordon the node it marked"
k cordon sim-2 >/dev/null
ctl patch node sim-2 --type merge -p '{"spec":{"unschedulable":null}}' >/dev/null 2>&1 &&
  fail "the controller's account uncordoned a node a person cordoned"
k uncordon sim-2 >/dev/null
echo "cordon with the mark allowed, without refused; another annotation or spec field refused; a person's cordon kept"

step "controller and agents"
start_controller ctl-a --status-file "$dir/ctl-a-status.yaml"
eventually 20 grep -q '"sync server listening".*"port":[1-9]' "$dir/ctl-a.log" || fail "the restarted controller does not listen"
start_agents agents-a "$(port_of ctl-a)"
eventually 20 grep -q "connected 3" "$dir/agents-a.log" || fail "agents did not connect"

# Every Event of `reason` is KMM's: Normal, its message and module annotation, source kmm.
kmm_events_are() {  # REASON MESSAGE MODULE COUNT
  k get events -n default --field-selector "reason=$1" -o json | jq -e --arg m "$2" --arg mod "$3" --argjson n "$4" \
    '(.items | length) == $n and all(.items[]; .type == "Normal" and .message == $m and
      .metadata.annotations.module == $mod and .source.component == "kmm" and
      .reportingComponent == "kmm" and .involvedObject.kind == "Node")'
}

step "a Module selecting the workers sim-0, sim-1 and the tainted sim-3: status, labels, events, finalizer"
module kmm-ci-a
# KMM counts only the nodes it would schedule on: not sim-3 (untolerated NoExecute taint).
eventually 20 status_is kmm-ci-a 2/2/2 || fail "status.moduleLoader is $(loader kmm-ci-a), want 2/2/2 (sim-3 is tainted)"
[[ $(k get module -n kmm-demo kmm-ci-a -o jsonpath='{.status.nodes[?(@.node=="sim-3")].phase}') == Skipped ]] ||
  fail "sim-3's row: $(k get module -n kmm-demo kmm-ci-a -o jsonpath='{.status.nodes}')"
eventually 10 ready_is kmm-ci-a "sim-0 sim-1" || fail "ready labels on '$(ready_nodes kmm-ci-a)'"
[[ -z $(k get node sim-0 -o jsonpath='{.metadata.labels.kmm\.node\.kubernetes\.io/kernel-version\.full}') ]] ||
  fail "a kernel-version.full label (KMM writes none)"
[[ $(k get nodes sim-2 sim-3 -o json | jq '[.items[].metadata.labels | keys[] | select(startswith("kmm.node"))] | length') == 0 ]] ||
  fail "sim-2 or sim-3 has kmm labels"
eventually 10 kmm_events_are ModuleLoaded "Module kmm-demo/kmm-ci-a loaded into the kernel" kmm-demo/kmm-ci-a 2 ||
  fail "ModuleLoaded events: $(k get events -n default --field-selector reason=ModuleLoaded -o json)"
# (Not piped into grep -q: with pipefail, kubectl's SIGPIPE when grep stops early fails it.)
[[ $(k get events -n default --field-selector reason=ModuleLoaded) == *"Module kmm-demo/kmm-ci-a loaded into the kernel"* ]] ||
  fail "kubectl get events does not show KMM's message"
[[ $(k get module -n kmm-demo kmm-ci-a -o jsonpath='{.metadata.finalizers}') == *kmodd.io/unload* ]] || fail "no finalizer"
[[ $(k get module -n kmm-demo kmm-ci-a -o jsonpath='{.status.conditions[?(@.type=="Available")].status}') == True ]] ||
  fail "Available is not True"

step "kmodd-controller status reads what the Kubernetes-mode controller writes"
ctl_status() { "$bin/kmodd-controller" status --status-file "$dir/ctl-a-status.yaml" "$@"; }
eventually 10 bash -c "'$bin/kmodd-controller' status --status-file '$dir/ctl-a-status.yaml' | grep -Eq '^kmm-demo +kmm-ci-a +2 +2 +2 +False'" ||
  fail "status has no row kmm-ci-a 2 2 2: $(ctl_status 2>&1)"
ctl_status
ctl_status --nodes | grep -Eq '^kmm-demo +kmm-ci-a +sim-0 +Loaded' || fail "status --nodes: $(ctl_status --nodes 2>&1)"

step "delete it: unloaded first, labels gone after the agents' report, then gone"
k delete module -n kmm-demo kmm-ci-a --wait=false >/dev/null
eventually 20 bash -c "! kubectl --kubeconfig '$KMODD_KUBE_KUBECONFIG' get module -n kmm-demo kmm-ci-a" || fail "Module still there"
[[ -z $(ready_nodes kmm-ci-a) ]] || fail "ready labels left: $(ready_nodes kmm-ci-a)"
[[ $(k get nodes -o json | jq '[.items[].metadata.labels | keys[] | select(startswith("kmm.node"))] | length') == 0 ]] ||
  fail "kmm labels left on nodes"
eventually 10 kmm_events_are ModuleUnloaded "Module kmm-demo/kmm-ci-a unloaded from the kernel" kmm-demo/kmm-ci-a 2 ||
  fail "ModuleUnloaded events: $(k get events -n default --field-selector reason=ModuleUnloaded -o json)"
python3 - "$dir/ctl-a.log" <<'PY'
import json, sys, datetime
def t(s): return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
gone, removed = {}, {}
for line in open(sys.argv[1]):
    try: e = json.loads(line)
    except ValueError: continue
    if e.get("msg") == "module phase" and e.get("phase") == "Gone":
        gone[e["node"]] = t(e["ts"])
    if e.get("msg") == "node labels updated" and "null" in e.get("patch", ""):
        removed[e["node"]] = t(e["ts"])
lat = {n: round((removed[n] - gone[n]) * 1000) for n in gone if n in removed}
print("label removal after the unload report (ms):", lat)
# Order and end state; the latency itself is a figure (tools/bench/test_latencies).
if len(lat) != 2 or min(lat.values()) < 0:
    sys.exit("labels not removed on both nodes after their unload reports")
PY

step "a GKE node (kernel 6.1.90+) is labelled ready; a label the API server refuses holds back no other"
start_agents agents-gke "$(port_of ctl-a)" 1 gke- 6.1.90+
eventually 20 grep -q "connected 1" "$dir/agents-gke.log" || fail "the GKE agent did not connect"
module kmm-ci-g gke
eventually 20 ready_is kmm-ci-g gke-0 ||
  fail "gke-0 (kernel 6.1.90+) is not labelled ready; label writes that failed: $(grep -c '"cannot label a node"' "$dir/ctl-a.log")"
eventually 10 status_is kmm-ci-g 1/1/1 || fail "kmm-ci-g status $(loader kmm-ci-g)"
# A cluster policy refuses kmm-ci-r's ready label with 422 Invalid, as the API server
# refuses an invalid label: the whole patch that carries it.
k apply -f - >/dev/null <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: kmodd-test-refuse-label}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [UPDATE], resources: [nodes]}]
  validations:
    - expression: "!has(object.metadata.labels) || !('kmm.node.kubernetes.io/kmm-demo.kmm-ci-r.ready' in object.metadata.labels)"
      reason: Invalid
      message: this cluster refuses the kmm-ci-r ready label
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: kmodd-test-refuse-label}
spec: {policyName: kmodd-test-refuse-label, validationActions: [Deny]}
YAML
eventually 20 bash -c "! kubectl --kubeconfig '$KMODD_KUBE_KUBECONFIG' label --dry-run=server node gke-0 kmm.node.kubernetes.io/kmm-demo.kmm-ci-r.ready=" ||
  fail "the policy does not refuse the label"
module kmm-ci-r gke
eventually 20 grep -q '"node label refused".*kmm-ci-r' "$dir/ctl-a.log" || fail "kmm-ci-r's label was not refused"
module kmm-ci-h gke
eventually 20 ready_is kmm-ci-h gke-0 || fail "kmm-ci-r's refused label holds back kmm-ci-h's"
ready_is kmm-ci-g gke-0 || fail "kmm-ci-g's label is gone"
ready_is kmm-ci-r "" || fail "kmm-ci-r's label is there"
sleep 3  # three writer passes: a refusal is not asked again on each
[[ $(grep -c '"node label refused"' "$dir/ctl-a.log") == 1 ]] ||
  fail "the refusal was reported $(grep -c '"node label refused"' "$dir/ctl-a.log") times, want once"
k get events -n default --field-selector reason=NodeLabelRefused -o json | jq -e \
  '(.items | length) == 1 and .items[0].count == 1 and .items[0].type == "Warning" and
   .items[0].involvedObject.name == "gke-0" and .items[0].metadata.annotations.module == "kmm-demo/kmm-ci-r"' >/dev/null ||
  fail "NodeLabelRefused events: $(k get events -n default --field-selector reason=NodeLabelRefused -o json)"
k delete validatingadmissionpolicybinding kmodd-test-refuse-label >/dev/null
k delete validatingadmissionpolicy kmodd-test-refuse-label >/dev/null

step "an invalid Module (no webhook): rejected in its status, naming the field; no finalizer"
module kmm-ci-bad worker '^6\.1\.(['
eventually 20 cond_is kmm-ci-bad Accepted False ||
  fail "no Accepted=False condition: $(k get module -n kmm-demo kmm-ci-bad -o jsonpath='{.status}')"
msg=$(cond kmm-ci-bad Accepted message)
echo "Accepted=False: $msg"
[[ $msg == *'spec.moduleLoader.container.kernelMappings[0].regexp: '* ]] || fail "the condition does not name the field: $msg"
[[ $(cond kmm-ci-bad Accepted reason) == Invalid ]] || fail "reason $(cond kmm-ci-bad Accepted reason)"
[[ $(loader kmm-ci-bad) == 0/0/0 ]] || fail "a rejected Module's counters: $(loader kmm-ci-bad)"
eventually 10 bash -c "'$bin/kmodd-controller' status --status-file '$dir/ctl-a-status.yaml' | grep -q 'Module kmm-demo/kmm-ci-bad: spec.moduleLoader.container.kernelMappings\[0\].regexp: '" ||
  fail "the status file does not list the rejection: $(ctl_status 2>&1)"
module_warning() {  # MODULE REASON: the Warning Events about the Module with that reason
  k get events -n kmm-demo --field-selector "involvedObject.kind=Module,involvedObject.name=$1,reason=$2,type=Warning" \
    -o jsonpath='{.items[*].message}'
}
eventually 10 bash -c "kubectl --kubeconfig '$KMODD_KUBE_KUBECONFIG' get events -n kmm-demo --field-selector involvedObject.name=kmm-ci-bad,reason=Rejected,type=Warning -o name | grep -q ." ||
  fail "no Warning Event Rejected on the Module: $(k get events -n kmm-demo)"
[[ $(module_warning kmm-ci-bad Rejected) == "$msg" ]] || fail "the Event says '$(module_warning kmm-ci-bad Rejected)', not the condition's message"

step "a Module whose pull Secret is missing says so until the Secret is created"
module kmm-ci-s worker '' 'imageRepoSecret: {name: kmm-ci-pull}'
eventually 20 status_is kmm-ci-s 2/2/2 || fail "status.moduleLoader is $(loader kmm-ci-s), want 2/2/2"
eventually 10 cond_is kmm-ci-s PullSecretResolved False ||
  fail "no PullSecretResolved=False condition: $(k get module -n kmm-demo kmm-ci-s -o jsonpath='{.status.conditions}')"
msg=$(cond kmm-ci-s PullSecretResolved message)
echo "PullSecretResolved=False: $msg"
[[ $msg == *'Secret kmm-demo/kmm-ci-pull'* && $msg == *'not found'* ]] || fail "the condition does not name the Secret: $msg"
[[ $(cond kmm-ci-s PullSecretResolved reason) == NotFound ]] || fail "reason $(cond kmm-ci-s PullSecretResolved reason)"
eventually 10 bash -c "kubectl --kubeconfig '$KMODD_KUBE_KUBECONFIG' get events -n kmm-demo --field-selector involvedObject.name=kmm-ci-s,reason=PullSecretNotFound,type=Warning -o name | grep -q ." ||
  fail "no Warning Event PullSecretNotFound on the Module: $(k get events -n kmm-demo)"
[[ $(module_warning kmm-ci-s PullSecretNotFound) == "$msg" ]] || fail "the Event says '$(module_warning kmm-ci-s PullSecretNotFound)'"
# Many writer passes have run since kmm-ci-bad was seen: a finalizer would be there by now.
[[ -z $(k get module -n kmm-demo kmm-ci-bad -o jsonpath='{.metadata.finalizers}') ]] ||
  fail "the rejected Module has finalizers $(k get module -n kmm-demo kmm-ci-bad -o jsonpath='{.metadata.finalizers}')"
[[ $(k get module -n kmm-demo kmm-ci-s -o jsonpath='{.metadata.finalizers}') == *kmodd.io/unload* ]] ||
  fail "the Module in force has no finalizer"

step "a controller restarted while the never-accepted Module is rejected still serves the others"
kill "$ctl_a_pid" "$agents_a_pid"
wait "$ctl_a_pid" "$agents_a_pid" 2>/dev/null || true
start_controller ctl-a --status-file "$dir/ctl-a-status.yaml"
eventually 20 grep -q '"sync server listening".*"port":[1-9]' "$dir/ctl-a.log" || fail "the restarted controller does not listen"
start_agents agents-a "$(port_of ctl-a)"
eventually 20 grep -q "connected 3" "$dir/agents-a.log" || fail "after the restart the agents' hellos were not answered"
module kmm-ci-x
eventually 20 status_is kmm-ci-x 2/2/2 || fail "after the restart kmm-ci-x is $(loader kmm-ci-x), want 2/2/2"
k delete module -n kmm-demo kmm-ci-x --wait=false >/dev/null
eventually 20 bash -c "! kubectl --kubeconfig '$KMODD_KUBE_KUBECONFIG' get module -n kmm-demo kmm-ci-x" || fail "kmm-ci-x still there"
timeout 20 kubectl --kubeconfig "$KMODD_KUBE_KUBECONFIG" delete module -n kmm-demo kmm-ci-bad >/dev/null ||
  fail "the rejected Module could not be deleted"
# One the API server takes (it checks only that a dockerconfigjson is JSON) but whose entry
# no node could read: reported, and sent to no node.
k create -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Secret
metadata: {name: kmm-ci-pull, namespace: kmm-demo}
type: kubernetes.io/dockerconfigjson
stringData: {.dockerconfigjson: '{"auths":{"127.0.0.1:5000":"Y2k6Y2k="}}'}
YAML
eventually 30 bash -c "[[ \$(kubectl --kubeconfig '$KMODD_KUBE_KUBECONFIG' get module -n kmm-demo kmm-ci-s -o jsonpath='{.status.conditions[?(@.type==\"PullSecretResolved\")].reason}') == InvalidContent ]]" ||
  fail "PullSecretResolved is $(cond kmm-ci-s PullSecretResolved reason): $(cond kmm-ci-s PullSecretResolved message)"
msg=$(cond kmm-ci-s PullSecretResolved message)
echo "PullSecretResolved=False InvalidContent: $msg"
[[ $msg == *'Secret kmm-demo/kmm-ci-pull: data[".dockerconfigjson"]: auths["127.0.0.1:5000"]: expected an object, got a string'* &&
   $msg == *'kubectl create secret docker-registry kmm-ci-pull -n kmm-demo'* ]] ||
  fail "the condition does not name the Secret, the field and the fix: $msg"
[[ $(cond kmm-ci-s PullSecretResolved status) == False ]] || fail "PullSecretResolved is not False"
eventually 10 bash -c "kubectl --kubeconfig '$KMODD_KUBE_KUBECONFIG' get events -n kmm-demo --field-selector involvedObject.name=kmm-ci-s,reason=PullSecretInvalidContent,type=Warning -o name | grep -q ." ||
  fail "no Warning Event PullSecretInvalidContent on the Module: $(k get events -n kmm-demo)"
k delete secret -n kmm-demo kmm-ci-pull >/dev/null
k create secret docker-registry kmm-ci-pull -n kmm-demo --docker-server=127.0.0.1:5000 \
  --docker-username=ci --docker-password=ci >/dev/null
eventually 30 cond_is kmm-ci-s PullSecretResolved True ||
  fail "PullSecretResolved is still $(cond kmm-ci-s PullSecretResolved status): $(cond kmm-ci-s PullSecretResolved message)"
echo "PullSecretResolved=True: $(cond kmm-ci-s PullSecretResolved message)"

step "a Module in a namespace not given to the controller: its pull Secret is Forbidden, and says what to add"
k create namespace kmm-other >/dev/null
k create secret docker-registry kmm-ci-pull -n kmm-other --docker-server=127.0.0.1:5000 \
  --docker-username=ci --docker-password=ci >/dev/null
k apply -f - >/dev/null <<YAML
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: kmm-ci-o, namespace: kmm-other}
spec:
  selector: {role: worker}
  imageRepoSecret: {name: kmm-ci-pull}
  moduleLoader:
    container:
      modprobe: {moduleName: kmm_ci_a}
      kernelMappings:
        - {regexp: '^.+\$', containerImage: '127.0.0.1:5000/kmm-ci-a:\$KERNEL_FULL_VERSION'}
YAML
other_cond() { k get module -n kmm-other kmm-ci-o -o jsonpath="{.status.conditions[?(@.type==\"PullSecretResolved\")].$1}"; }
eventually 20 bash -c "[[ \$(kubectl --kubeconfig '$KMODD_KUBE_KUBECONFIG' get module -n kmm-other kmm-ci-o -o jsonpath='{.status.conditions[?(@.type==\"PullSecretResolved\")].reason}') == Forbidden ]]" ||
  fail "PullSecretResolved of kmm-other/kmm-ci-o: $(other_cond reason): $(other_cond message)"
msg=$(other_cond message)
echo "PullSecretResolved=False Forbidden: $msg"
[[ $msg == *'Secret kmm-other/kmm-ci-pull cannot be read'* && $msg == *'add kmm-other to the Helm value moduleNamespaces'* ]] ||
  fail "the condition does not say what to add: $msg"
k delete module -n kmm-other kmm-ci-o --wait=false >/dev/null
eventually 20 bash -c "! kubectl --kubeconfig '$KMODD_KUBE_KUBECONFIG' get module -n kmm-other kmm-ci-o" || fail "kmm-ci-o still there"
k delete module -n kmm-demo kmm-ci-s --wait=false >/dev/null
eventually 20 bash -c "! kubectl --kubeconfig '$KMODD_KUBE_KUBECONFIG' get module -n kmm-demo kmm-ci-s" || fail "kmm-ci-s still there"

step "a device plugin: its DaemonSet as KMM makes it (the user's mount at the plugin path wins), replaced on change, a refusal evented, gone with the plugin"
dp_line() {  # IMAGE [CPU]: a devicePlugin whose container mounts the kubelet's plugin directory
  # itself; the Module tolerates the not-ready taint the API server gives these kubelet-less
  # Nodes (a plugin targets only nodes it may schedule on, as in KMM).
  echo "devicePlugin: {container: {image: '$1', resources: {limits: {cpu: '${2:-100m}'}}, volumeMounts: [{name: plugins, mountPath: /var/lib/kubelet/device-plugins}]}, volumes: [{name: plugins, hostPath: {path: /var/lib/kubelet/device-plugins}}]}"
  echo "  tolerations: [{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoSchedule}]"
}
plugin_ds() {  # the names of kmm-ci-dp's device plugin DaemonSets
  k get daemonsets -n kmm-demo -l kmm.node.kubernetes.io/module.name=kmm-ci-dp,kmm.node.kubernetes.io/role=device-plugin \
    -o jsonpath='{.items[*].metadata.name}'
}
module kmm-ci-dp worker '^.+$' "$(dp_line 127.0.0.1:5000/plugin:1)"
eventually 20 bash -c "[[ -n \$(kubectl --kubeconfig '$KMODD_KUBE_KUBECONFIG' get daemonsets -n kmm-demo -l kmm.node.kubernetes.io/module.name=kmm-ci-dp -o name) ]]" ||
  fail "no device plugin DaemonSet: $(grep -i 'device plugin' "$dir/ctl-a.log" | tail -3)"
ds=$(plugin_ds)
[[ $ds == kmm-ci-dp-device-plugin-* && $ds != *" "* ]] || fail "DaemonSets: '$ds'"
k get daemonset -n kmm-demo "$ds" -o json | jq -e '
  (.metadata.ownerReferences | length) == 1 and .metadata.ownerReferences[0].kind == "Module" and
  .metadata.ownerReferences[0].name == "kmm-ci-dp" and .metadata.ownerReferences[0].controller == true and
  (.spec.template.spec.nodeSelector | keys) == ["kmm.node.kubernetes.io/kmm-demo.kmm-ci-dp.device-plugin-target",
                                                 "kmm.node.kubernetes.io/kmm-demo.kmm-ci-dp.ready"] and
  .spec.template.spec.priorityClassName == "system-node-critical" and
  .spec.template.spec.containers[0].securityContext.privileged == true and
  ([.spec.template.spec.containers[0].volumeMounts[] | select(.mountPath == "/var/lib/kubelet/device-plugins")] | length) == 1' >/dev/null ||
  fail "the DaemonSet is not KMM's shape: $(k get daemonset -n kmm-demo "$ds" -o json)"
eventually 20 status_is kmm-ci-dp 2/2/2 || fail "the module is not loaded beside its plugin: $(loader kmm-ci-dp)"
# The target label: on the schedulable workers it selects (not sim-3: an untolerated
# NoExecute taint); cordoning takes it off (a drain evicts the plugin), not the module.
targets() { k get nodes -l kmm.node.kubernetes.io/kmm-demo.kmm-ci-dp.device-plugin-target -o jsonpath='{.items[*].metadata.name}'; }
targets_are() { [[ $(targets) == "$1" ]]; }
eventually 20 targets_are "sim-0 sim-1" || fail "device-plugin-target on '$(targets)', want sim-0 sim-1"
k cordon sim-1 >/dev/null
eventually 20 targets_are "sim-0" || fail "after cordoning sim-1: device-plugin-target on '$(targets)'"
ready_is kmm-ci-dp "sim-0 sim-1" || fail "cordoning sim-1 took its ready label: '$(ready_nodes kmm-ci-dp)'"
k uncordon sim-1 >/dev/null
eventually 20 targets_are "sim-0 sim-1" || fail "after uncordoning sim-1: device-plugin-target on '$(targets)'"

# A new plugin image: the same DaemonSet, replaced.
module kmm-ci-dp worker '^.+$' "$(dp_line 127.0.0.1:5000/plugin:2)"
eventually 20 bash -c "[[ \$(kubectl --kubeconfig '$KMODD_KUBE_KUBECONFIG' get daemonset -n kmm-demo '$ds' -o jsonpath='{.spec.template.spec.containers[0].image}') == 127.0.0.1:5000/plugin:2 ]]" ||
  fail "the DaemonSet was not updated: $(k get daemonset -n kmm-demo "$ds" -o jsonpath='{.spec.template.spec.containers[0].image}')"
[[ $(plugin_ds) == "$ds" ]] || fail "DaemonSets after the change: '$(plugin_ds)'"

# A spec the API server refuses (no such CPU quantity): a Warning Event with its words; the
# module stays loaded and labelled.
module kmm-ci-dp worker '^.+$' "$(dp_line 127.0.0.1:5000/plugin:3 lots)"
eventually 20 bash -c "kubectl --kubeconfig '$KMODD_KUBE_KUBECONFIG' get events -n kmm-demo --field-selector reason=DevicePluginRefused -o jsonpath='{.items[*].message}' | grep -q 'quantities must match'" ||
  fail "no DevicePluginRefused Event: $(k get events -n kmm-demo --field-selector reason=DevicePluginRefused -o json)"
dp_condition() { k get module -n kmm-demo kmm-ci-dp -o jsonpath='{.status.conditions[?(@.type=="DevicePluginAccepted")].status} {.status.conditions[?(@.type=="DevicePluginAccepted")].message}'; }
eventually 20 bash -c "[[ \"\$(kubectl --kubeconfig '$KMODD_KUBE_KUBECONFIG' get module -n kmm-demo kmm-ci-dp -o jsonpath='{.status.conditions[?(@.type==\"DevicePluginAccepted\")].status} {.status.conditions[?(@.type==\"DevicePluginAccepted\")].message}')\" == 'False '*'quantities must match'* ]]" ||
  fail "no DevicePluginAccepted=False condition with the API server's words: $(dp_condition)"
status_is kmm-ci-dp 2/2/2 || fail "a refused plugin changed the module's status: $(loader kmm-ci-dp)"
ready_is kmm-ci-dp "sim-0 sim-1" || fail "a refused plugin changed the ready labels: '$(ready_nodes kmm-ci-dp)'"

# The plugin removed from the Module: its DaemonSet goes.
module kmm-ci-dp
eventually 20 bash -c "[[ -z \$(kubectl --kubeconfig '$KMODD_KUBE_KUBECONFIG' get daemonsets -n kmm-demo -l kmm.node.kubernetes.io/module.name=kmm-ci-dp -o name) ]]" ||
  fail "the DaemonSet stayed after the plugin was removed: $(plugin_ds)"
eventually 20 targets_are "" || fail "device-plugin-target stayed on '$(targets)' after the plugin was removed"
k delete module -n kmm-demo kmm-ci-dp --wait=false >/dev/null
eventually 20 bash -c "! kubectl --kubeconfig '$KMODD_KUBE_KUBECONFIG' get module -n kmm-demo kmm-ci-dp" || fail "kmm-ci-dp still there"

step "a DRA driver: its DaemonSet and DeviceClasses as KMM makes them, a class changed, one removed, a taken name refused, all gone with the Module"
dra_line() {  # EXPRESSION [SECOND-CLASS]: spec.dra with class a (its CEL selector) and maybe another
  echo "dra: {driverName: gpu.kmm-ci.example.com, container: {image: '127.0.0.1:5000/dra:1'}, deviceClasses: [{name: a.kmm-ci.example.com, selectors: [{cel: {expression: '$1'}}], config: [{opaque: {driver: gpu.kmm-ci.example.com, parameters: {mode: shared}}}]}${2:+, {name: $2}}]}"
  echo "  tolerations: [{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoSchedule}]"
}
dra_ds() {  # the names of kmm-ci-dra's DRA DaemonSets
  k get daemonsets -n kmm-demo -l kmm.node.kubernetes.io/module.name=kmm-ci-dra,kmm.node.kubernetes.io/role=dra \
    -o jsonpath='{.items[*].metadata.name}'
}
dra_classes() {  # the names of kmm-ci-dra's DeviceClasses
  k get deviceclasses -l kmm.node.kubernetes.io/module.name=kmm-ci-dra,kmm.node.kubernetes.io/module.namespace=kmm-demo \
    -o jsonpath='{.items[*].metadata.name}'
}
dra_ds_is() { [[ $(dra_ds) == "$1" ]]; }
dra_classes_are() { [[ $(dra_classes) == "$1" ]]; }
module kmm-ci-dra worker '^.+$' "$(dra_line true b.kmm-ci.example.com)"
eventually 20 bash -c "[[ -n \$(kubectl --kubeconfig '$KMODD_KUBE_KUBECONFIG' get daemonsets -n kmm-demo -l kmm.node.kubernetes.io/module.name=kmm-ci-dra,kmm.node.kubernetes.io/role=dra -o name) ]]" ||
  fail "no DRA DaemonSet: $(grep -i 'dra\|DeviceClass' "$dir/ctl-a.log" | tail -3)"
ds=$(dra_ds)
[[ $ds == kmm-ci-dra-dra-* && $ds != *" "* ]] || fail "DRA DaemonSets: '$ds'"
k get daemonset -n kmm-demo "$ds" -o json | jq -e '
  .metadata.ownerReferences[0].kind == "Module" and .metadata.ownerReferences[0].name == "kmm-ci-dra" and
  .spec.template.spec.hostNetwork == true and
  .spec.template.spec.priorityClassName == "system-node-critical" and
  (.spec.template.spec.nodeSelector | keys) == ["kmm.node.kubernetes.io/kmm-demo.kmm-ci-dra.dra-target", "kmm.node.kubernetes.io/kmm-demo.kmm-ci-dra.ready"] and
  .spec.template.spec.containers[0].name == "dra" and
  .spec.template.spec.containers[0].securityContext.privileged == true and
  .spec.template.spec.containers[0].livenessProbe.grpc.port == 51515 and
  .spec.template.spec.containers[0].livenessProbe.grpc.service == "liveness" and
  ([.spec.template.spec.containers[0].env[] | select(.name == "HEALTHCHECK_PORT" and .value == "51515")] | length) == 1 and
  ([.spec.template.spec.containers[0].env[] | select(.name == "NODE_NAME")][0].valueFrom.fieldRef.fieldPath == "spec.nodeName") and
  ([.spec.template.spec.volumes[].hostPath.path] == ["/var/lib/kubelet/plugins/", "/var/lib/kubelet/plugins_registry/", "/var/run/cdi"])' >/dev/null ||
  fail "the DRA DaemonSet is not KMM's shape: $(k get daemonset -n kmm-demo "$ds" -o json)"
eventually 20 dra_classes_are "a.kmm-ci.example.com b.kmm-ci.example.com" || fail "DeviceClasses: '$(dra_classes)'"
k get deviceclass a.kmm-ci.example.com -o json | jq -e '
  .spec.selectors == [{"cel": {"expression": "true"}}] and
  .spec.config[0].opaque.driver == "gpu.kmm-ci.example.com" and .spec.config[0].opaque.parameters.mode == "shared"' >/dev/null ||
  fail "DeviceClass a: $(k get deviceclass a.kmm-ci.example.com -o json)"

# Class a's selector changed, b dropped, a name someone else's DeviceClass has asked for:
# a replaced, b deleted, the taken one refused (not taken over) in a DraRefused Event.
k create -f - >/dev/null <<YAML
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: taken.kmm-ci.example.com}
spec: {}
YAML
module kmm-ci-dra worker '^.+$' "$(dra_line false taken.kmm-ci.example.com)"
sel_a() { k get deviceclass a.kmm-ci.example.com -o jsonpath='{.spec.selectors[0].cel.expression}'; }
eventually 20 bash -c "[[ \$(kubectl --kubeconfig '$KMODD_KUBE_KUBECONFIG' get deviceclass a.kmm-ci.example.com -o jsonpath='{.spec.selectors[0].cel.expression}') == false ]]" ||
  fail "DeviceClass a was not updated: '$(sel_a)'"
eventually 20 dra_classes_are "a.kmm-ci.example.com" || fail "DeviceClasses after b was removed: '$(dra_classes)'"
eventually 20 bash -c "kubectl --kubeconfig '$KMODD_KUBE_KUBECONFIG' get events -n kmm-demo --field-selector reason=DraRefused,involvedObject.name=kmm-ci-dra -o jsonpath='{.items[*].message}' | grep -q 'DeviceClass taken.kmm-ci.example.com exists and is not this Module'" ||
  fail "no DraRefused Event for the taken name: $(k get events -n kmm-demo --field-selector reason=DraRefused -o json)"
[[ -z $(k get deviceclass taken.kmm-ci.example.com -o jsonpath='{.metadata.labels}') ]] || fail "the taken DeviceClass was relabelled"
dra_condition() { k get module -n kmm-demo kmm-ci-dra -o jsonpath='{.status.conditions[?(@.type=="DraAccepted")].status} {.status.conditions[?(@.type=="DraAccepted")].message}'; }
dra_refused_condition() { [[ $(dra_condition) == "False "*"taken.kmm-ci.example.com"* ]]; }
eventually 20 dra_refused_condition || fail "no DraAccepted=False condition naming the taken class: '$(dra_condition)'"
dra_targets() { k get nodes -l kmm.node.kubernetes.io/kmm-demo.kmm-ci-dra.dra-target -o jsonpath='{.items[*].metadata.name}'; }
dra_targets_are() { [[ $(dra_targets) == "$1" ]]; }
eventually 20 dra_targets_are "sim-0 sim-1" || fail "dra-target on '$(dra_targets)', want sim-0 sim-1"
dra_ds_is "$ds" || fail "DRA DaemonSets after the change: '$(dra_ds)'"

# The Module deleted: its DaemonSet and DeviceClasses go; someone else's stays.
k delete module -n kmm-demo kmm-ci-dra --wait=false >/dev/null
eventually 30 dra_ds_is "" || fail "the DRA DaemonSet stayed after the Module was deleted: '$(dra_ds)'"
eventually 20 dra_classes_are "" || fail "DeviceClasses stayed after the Module was deleted: '$(dra_classes)'"
k get deviceclass taken.kmm-ci.example.com >/dev/null || fail "someone else's DeviceClass was deleted"
eventually 20 dra_targets_are "" || fail "dra-target stayed on '$(dra_targets)' after the Module was deleted"
eventually 20 bash -c "! kubectl --kubeconfig '$KMODD_KUBE_KUBECONFIG' get module -n kmm-demo kmm-ci-dra" || fail "kmm-ci-dra still there"

step "API server restart and watch expiry: a stopped controller relists and sees what it missed"
module kmm-ci-b
eventually 20 status_is kmm-ci-b 2/2/2 || fail "status $(loader kmm-ci-b)"
eventually 10 ready_is kmm-ci-b "sim-0 sim-1" || fail "labels on '$(ready_nodes kmm-ci-b)'"
# Frozen, the controller sees nothing of the restart nor of what follows: its watches then
# resume from versions the restarted server's watch cache no longer holds (410 Gone).
kill -STOP "$ctl_a_pid"
"$src/tools/kube/start" --restart-apiserver "$dir/kube" >/dev/null
# shellcheck disable=SC1091
source "$dir/kube/env"
# kmm-ci-b vanishes without a deletion the controller could watch (its finalizer stripped, as
# a forced delete does); kmm-ci-c appears.
k patch module -n kmm-demo kmm-ci-b --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null
k delete module -n kmm-demo kmm-ci-b >/dev/null
module kmm-ci-c
expired_before=$(grep -c '"watch of Modules expired; listing again"' "$dir/ctl-a.log" || true)
kill -CONT "$ctl_a_pid"
eventually 30 bash -c "[[ \$(grep -c '\"watch of Modules expired; listing again\"' '$dir/ctl-a.log') -gt $expired_before ]]" ||
  fail "the controller did not relist Modules after a 410"
grep '"watch of Modules expired' "$dir/ctl-a.log" | tail -1
eventually 30 status_is kmm-ci-c 2/2/2 || fail "after the relist: kmm-ci-c status $(loader kmm-ci-c)"
eventually 10 ready_is kmm-ci-c "sim-0 sim-1" || fail "after the relist: kmm-ci-c labels on '$(ready_nodes kmm-ci-c)'"
eventually 10 ready_is kmm-ci-b "" || fail "after the relist: kmm-ci-b labels still on '$(ready_nodes kmm-ci-b)'"

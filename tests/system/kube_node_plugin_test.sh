#!/usr/bin/env bash
# The driver stack on a real node (issue 14 item 7): the harness's kube-apiserver with a real
# node (tools/kube/node: kube-controller-manager, kube-scheduler, a kubelet with containerd
# and runc) named kmodd-node, whose agent is the real kmodd-agent in the qemu VM (the
# Node's kmodd.io/kernel-release label names the VM's kernel, which the host's kubelet does
# not run), kmodd-controller on the host in --kubernetes mode, and the demo Module with a
# device plugin: kmodd-test-device-plugin (tools/test-device-plugin), pulled by containerd
# from the test registry.
#   1. create (version v1, the node pinned to v1 by its version-module label): kmm_ci_fw
#      loaded in the VM, .ready on kmodd-node, the plugin's DaemonSet Pod Ready there,
#      .device-plugin-ready, kmodd.test/widget: 3 in the Node's allocatable,
#      status.devicePlugin 1/1/1, and a Pod asking for one widget runs to Completed;
#   then a plugin spec the API server refuses (a bad CPU quantity): DevicePluginAccepted=False
#      and a DevicePluginRefused Event with its words, the module and the running plugin
#      unaffected; restored, True again;
#   2. cordon: the target label goes and the plugin's Pod with it, the module stays loaded
#      (.ready, status); uncordon: the Pod comes back;
#   3. ordered upgrade v1 -> v2 (the Module, then the node's label): from the controller's
#      log, one clock: the node held at v1 while the plugin Pod is there < the Pod gone <
#      the agent's first word of v2 (nothing but Loaded v1 before) < v2 Loaded < the v2
#      plugin Pod Ready (its .device-plugin-ready label); the v1 DaemonSet deleted once it
#      runs nowhere; in the VM's kernel log, v1 unloaded before v2 loaded;
#   4. delete: the DaemonSet deleted < the plugin Pod gone < the node's module Gone < the
#      finalizer removed; then no DaemonSet, no kmm label on the Node, no
#      version-schedule-pod label.
#   3b. the controller killed, the Module and the node's label moved back to v1 meanwhile:
#      the new controller sends the node nothing until the v2 plugin Pod is gone, then v1;
#   3c. a plain image change of an unversioned Module (kmm_ci_a, its own plugin): the same
#      order, from the controller's log;
#   3d. drain (issue 15 item 4): a ModulePolicy drains Pods using kmodd.test/widget; a
#      running Pod uses one and a PodDisruptionBudget protects it: the upgrade to v2 cordons
#      the node (marked), the eviction is refused and the node keeps v1 while the budget
#      stands; the budget deleted, the Pod is evicted, v2 loads, the node is uncordoned;
#      then a node cordoned by a person: drained and moved back to v1, and left cordoned;
#   Beside them, from before step 1 to after step 3, a DRA Module (an in-tree driver: no
#   moduleLoader) whose driver is the test plugin standing in (it answers a gRPC liveness
#   probe as KMM's, on a free port; it does not speak the DRA kubelet API): its DaemonSet's
#   Pod runs on the node (host network) and stays live past the probe's first checks,
#   .dra-ready, status.dra 1/1/1, its DeviceClass; deleted, nothing of it is left.
# The figures (Loaded -> .ready -> plugin Ready -> allocatable) are printed as "# figure"
# lines; docs/performance.md quotes them.
#
# Fails, never skips, without the harnesses (tools/kube/setup, tools/vm/setup) or packages.
# usage: kube_node_plugin_test.sh BIN_DIR REPO_ROOT PLUGIN_BINARY
set -uo pipefail
bin="$1"
root="$2"
plugin_bin="$3"
case_name=kube-node-plugin
node=kmodd-node
export KMODD_KUBE_NODE_LOCK_TIMEOUT=${KMODD_KUBE_NODE_LOCK_TIMEOUT:-360}
show() { echo "--- $(basename "$1"):"; tail -n 60 "$1" 2>/dev/null; echo "---"; }
fail() {
  echo "FAIL: $case_name: $*"
  for f in "$tmp"/*.log "$tmp"/vm1.out; do show "$f"; done
  if [[ -n ${KMODD_NODE_KUBELET_LOG:-} ]]; then
    echo "--- pods:"; kubectl get pods -A -o wide 2>&1 | tail -n 20
    echo "--- kubelet errors:"; grep -E '^E' "$KMODD_NODE_KUBELET_LOG" | tail -n 20
  fi
  exit 1
}
note() { echo "# $*"; }
ms() { date +%s%3N; }
# shellcheck source=tests/lib/harness.bash
. "$root/tests/lib/harness.bash"
# shellcheck source=tests/lib/kube.bash
. "$root/tests/lib/kube.bash"
# shellcheck source=tests/lib/vm.bash
. "$root/tests/lib/vm.bash"
# shellcheck source=tests/lib/system.bash
. "$root/tests/lib/system.bash"
declare tmp
make_temp_dir tmp kmodd-kube-node-plugin KMODD_E2E_KEEP

# --- the rig, the registry, the images -----------------------------------------------------
vm_rig_require
K=$KMODD_VM_KERNEL
require_tools docker-registry skopeo umoci python3 openssl jq buildah containerd runc ctr
[[ $(id -u) -eq 0 ]] || fail "the kubelet and containerd need root"
[[ -x $plugin_bin ]] || fail "$plugin_bin not found: build kmodd-test-device-plugin"
vm_strip_bins "$bin" "$tmp/bin" kmodd-agent agentctl
require_bins "$bin" kmodd-controller
registry_start "$tmp/reg"
reg_port=${KMODD_REGISTRY##*:}
push_demo_images "$tmp/reg"
image_env=$("$root/tools/test-device-plugin/image" --bin "$plugin_bin" "$KMODD_REGISTRY" 2>"$tmp/image.log") \
  || fail "tools/test-device-plugin/image failed"
eval "$image_env"
# shellcheck disable=SC2154  # set by push_demo_images
note "images: v1 $digest_v1, v2 $digest_v2, plugin $KMODD_TEST_DEVICE_PLUGIN_IMAGE"

# --- the API server and its node ----------------------------------------------------------
kube_start "$tmp/kube"
export KUBECONFIG=$KMODD_KUBE_KUBECONFIG
on_exit quietly "$root/tools/kube/node" stop "$tmp/kube"
"$root/tools/kube/node" start --name "$node" --registry "$KMODD_REGISTRY" "$tmp/kube" \
  >"$tmp/node.log" 2>&1 || fail "tools/kube/node start failed"
# shellcheck source=/dev/null
. "$tmp/kube/node/env"
kube_crd_install
ns=kmodd-system
kubectl create namespace "$ns" >/dev/null
kubectl create namespace kmm-demo >/dev/null
kubectl -n "$ns" create serviceaccount kmodd-agent >/dev/null
kubectl label node "$node" kmodd.io/demo=true "kmodd.io/kernel-release=$K" \
  kmm.node.kubernetes.io/version-module.kmm-demo.kmm-ci=v1 >/dev/null || fail "cannot label $node"
# The agent's credential, as its DaemonSet Pod would hold it: a token bound to a Pod on the
# node. The kubelet really runs that Pod (a sleeping busybox of the node's own image).
kubectl create -f - >/dev/null <<YAML || fail "cannot create the agent's Pod"
apiVersion: v1
kind: Pod
metadata: {name: kmodd-agent-$node, namespace: $ns}
spec:
  serviceAccountName: kmodd-agent
  automountServiceAccountToken: false
  nodeName: $node
  containers:
  - {name: agent, image: $KMODD_NODE_PAUSE_IMAGE, imagePullPolicy: Never, command: [/bin/busybox, sleep, "3600"]}
YAML
mkdir -p "$tmp/guest/etc"
kubectl -n "$ns" create token kmodd-agent --audience kmodd --duration 1h --bound-object-kind Pod \
  --bound-object-name "kmodd-agent-$node" >"$tmp/guest/etc/token" || fail "no token for the agent"
eventually 60 kubectl -n kmm-demo get serviceaccount default || fail "no default ServiceAccount in kmm-demo"

# --- the controller and the VM's agent --------------------------------------------------------
kube_guest_controller "$ns"
ctl_log=$tmp/controller.log
director_start "$tmp/director"
kube_guest_agent "$node" "$ctl_port"
director_guest_lib "$tmp/guest/lib.sh"
cat >"$tmp/guest/boot1.sh" <<'EOF'
. /kmodd-test/lib.sh
sh /kmodd-test/agent.sh
# The whole test, at most 15 minutes: the host says when it is done.
i=0
while [ "$(current)" != done ]; do i=$((i + 1)); [ $i -lt 9000 ] || break; usleep 100000; done
section done.modules; grep "^kmm_ci_fw " /proc/modules
stop_agent
section agent.log; cat /run/kmodd-agent.log
EOF
kube_guest_boot 1000
eventually 180 grep -q "\"agent connected\",\"node\":\"$node\"" "$tmp/controller.log" \
  || fail "the VM's agent never connected as $node"
note "the VM's agent is served as $node"

# --- helpers ------------------------------------------------------------------------------
label() { kubectl get node "$node" -o json | jq -r --arg k "$1" '.metadata.labels[$k] // "<none>"'; }
has_label() { [[ $(label "$1") != "<none>" ]]; }
no_label() { [[ $(label "$1") == "<none>" ]]; }
pfx=kmm.node.kubernetes.io/kmm-demo.kmm-ci
plugin_pods() {  # plugin_pods [READY]: the plugin Pods on the node (names), or only Ready ones
  kubectl get pods -n kmm-demo -l kmm.node.kubernetes.io/role=device-plugin -o json |
    jq -r --arg ready "${1:-}" '.items[] | select($ready == "" or ([.status.conditions[]? | select(.type == "Ready" and .status == "True")] | length > 0)) | .metadata.name'
}
no_plugin_pod() { [[ -z $(plugin_pods) ]]; }
plugin_ready() { [[ -n $(plugin_pods ready) ]]; }
allocatable() { kubectl get node "$node" -o jsonpath='{.status.allocatable.kmodd\.test/widget}'; }
dp_status() { kubectl get module -n kmm-demo kmm-ci -o jsonpath='{.status.devicePlugin.nodesMatchingSelectorNumber}/{.status.devicePlugin.desiredNumber}/{.status.devicePlugin.availableNumber}'; }
daemonsets() { kubectl get daemonsets -n kmm-demo -l kmm.node.kubernetes.io/module.name=kmm-ci -o jsonpath='{.items[*].metadata.name}'; }
module_apply() {  # module_apply TAG [CPU]: the Module at version TAG, image TAG; its plugin's CPU limit
  local resources=""
  [[ -n ${2:-} ]] && resources="resources: {limits: {cpu: '$2'}}"
  kubectl apply -f - >/dev/null <<YAML
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: kmm-ci, namespace: kmm-demo}
spec:
  selector: {kmodd.io/demo: "true"}
  devicePlugin:
    container:
      image: $KMODD_TEST_DEVICE_PLUGIN_IMAGE
      args: [--resource, widget, --count, "3", --poll-interval-ms, "200"]
      $resources
  moduleLoader:
    container:
      version: $1
      imagePullPolicy: IfNotPresent
      modprobe: {moduleName: kmm_ci_fw, firmwarePath: /firmware}
      kernelMappings:
        - regexp: '^.+\$'
          containerImage: "10.0.2.2:$reg_port/kmodd/kmm-ci:$1-\$KERNEL_FULL_VERSION"
          registryTLS: {insecure: true}
YAML
}
# log_ms PYTHON-PREDICATE [AFTER_MS]: the time (ms) of the first controller log line after
# AFTER_MS for which the predicate on e (the line's JSON) holds; nothing when none.
log_ms() {
  python3 - "$ctl_log" "$1" "${2:-0}" <<'PY'
import datetime, json, sys
path, pred, after = sys.argv[1], sys.argv[2], int(sys.argv[3])
for line in open(path):
    try: e = json.loads(line)
    except ValueError: continue
    t = datetime.datetime.strptime(e["ts"].rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f")
    ms = int(t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)
    if ms >= after and eval(pred, {"e": e}):
        print(ms); break
PY
}
# only_loaded VERSION START_MS END_MS: between the two, the node's every module phase report
# in the controller's log is Loaded VERSION.
only_loaded() {
  python3 - "$ctl_log" "$node" "$1" "$2" "$3" <<'PY'
import datetime, json, sys
path, node, version, start, end = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
for line in open(path):
    try: e = json.loads(line)
    except ValueError: continue
    t = datetime.datetime.strptime(e["ts"].rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f")
    ms = int(t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)
    if start <= ms < end and e.get("node") == node and e.get("msg") == "module phase":
        if e.get("phase") != "Loaded" or e.get("version") != version:
            print("reported before the plugin Pod was gone:", line.strip()); sys.exit(1)
PY
}
# swap_order WHAT T0 WHO NEW PLUGIN_READY: from the controller's log after T0, for the node's
# module WHO (a predicate on e), when the node was held at its old entry, its plugin Pod gone,
# the agent's first report of the new driver (NEW), that one Loaded, and the plugin Ready
# again (PLUGIN_READY, a label write): printed, and checked to come in that order. Sets t_gone.
swap_order() {
  local what=$1 t0=$2 who=$3 new=$4 plugin_ready=$5 t_hold t_new t_new_loaded t_new_dp
  t_hold=$(log_ms "$who and e.get('msg') == 'module kept on the node while its plugin Pod is there'" "$t0")
  t_gone=$(log_ms "$who and e.get('msg') == \"plugin Pod gone: the node is sent the module's plan\"" "$t0")
  t_new=$(log_ms "$who and e.get('msg') == 'module phase' and $new" "$t0")
  t_new_loaded=$(log_ms "$who and e.get('msg') == 'module phase' and $new and e.get('phase') == 'Loaded'" "$t0")
  t_new_dp=$(log_ms "$plugin_ready" "${t_new_loaded:-0}")
  note "$what timeline (ms after it began): held $((t_hold - t0)), plugin Pod gone $((t_gone - t0)), agent on the new driver $((t_new - t0)), new Loaded $((t_new_loaded - t0)), plugin Ready $((t_new_dp - t0))"
  [[ -n $t_hold && -n $t_gone && -n $t_new && -n $t_new_loaded && -n $t_new_dp ]] \
    || fail "a step of the $what is missing from the controller's log"
  ((t_hold <= t_gone && t_gone < t_new && t_new <= t_new_loaded && t_new_loaded < t_new_dp)) \
    || fail "the $what's order is wrong: held $t_hold, Pod gone $t_gone, new $t_new, new Loaded $t_new_loaded, plugin Ready $t_new_dp"
}
on_node="e.get('node') == '$node'"
ready_write="e.get('msg', '').startswith('node labels updated') and e.get('node') == '$node' and '\"$pfx.ready\":\"\"' in e.get('patch', '')"
dp_ready_write="e.get('msg', '').startswith('node labels updated') and e.get('node') == '$node' and '\"$pfx.device-plugin-ready\":\"\"' in e.get('patch', '')"

# --- the DRA Module, beside the rest -----------------------------------------------------------
# KMM's probe port (51515) on the host network could be any other test's port here: the
# Module gives its own probe on a free one (kmodd takes a user livenessProbe in its place; the
# default's shape is checked in kube: controller).
dra_health_port=$(free_port)
dra_pods() { kubectl get pods -n kmm-demo -l kmm.node.kubernetes.io/module.name=kmm-ci-dra,kmm.node.kubernetes.io/role=dra -o json; }
dra_ready() { [[ $(dra_pods | jq '[.items[] | select(.status.conditions[]? | .type == "Ready" and .status == "True")] | length') == 1 ]]; }
kubectl apply -f - >/dev/null <<YAML || fail "cannot create the DRA Module"
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: kmm-ci-dra, namespace: kmm-demo}
spec:
  selector: {kmodd.io/demo: "true"}
  dra:
    driverName: dra.kmodd.test
    container:
      image: $KMODD_TEST_DEVICE_PLUGIN_IMAGE
      args: [--resource, dra-widget, --plugin-dir, /var/lib/kubelet/plugins, --health-address, "127.0.0.1:$dra_health_port"]
      livenessProbe: {grpc: {port: $dra_health_port, service: liveness}, initialDelaySeconds: 30, periodSeconds: 10, timeoutSeconds: 5, failureThreshold: 3}
    deviceClasses:
      - {name: widget.dra.kmodd.test, selectors: [{cel: {expression: 'device.driver == "dra.kmodd.test"'}}]}
YAML
t_dra=$(ms)

# --- 1. create --------------------------------------------------------------------------------
t_apply=$(ms)
module_apply v1 || fail "cannot create the Module"
eventually 240 has_label "$pfx.ready" || fail "no .ready label on $node: $(kubectl get node "$node" --show-labels)"
eventually 180 plugin_ready || fail "the plugin Pod is not Ready: $(kubectl get pods -A -o wide)"
eventually 30 has_label "$pfx.device-plugin-ready" || fail "no .device-plugin-ready label"
until [[ $(allocatable) == 3 ]]; do
  (( $(ms) - t_apply < 300000 )) || fail "kmodd.test/widget never allocatable: '$(allocatable)'"
  sleep 0.1
done
t_alloc=$(ms)
eventually 30 bash -c "[[ \$(kubectl get module -n kmm-demo kmm-ci -o jsonpath='{.status.devicePlugin.availableNumber}') == 1 ]]" \
  || fail "status.devicePlugin is $(dp_status), want 1/1/1"
[[ $(dp_status) == 1/1/1 ]] || fail "status.devicePlugin is $(dp_status), want 1/1/1"
[[ $(label beta.kmm.node.kubernetes.io/version-schedule-pod.kmm-demo.kmm-ci) == v1 ]] \
  || fail "version-schedule-pod is $(label beta.kmm.node.kubernetes.io/version-schedule-pod.kmm-demo.kmm-ci), want v1"
t_loaded=$(log_ms "$on_node and e.get('msg') == 'module phase' and e.get('phase') == 'Loaded'")
t_ready=$(log_ms "$ready_write")
t_dp_ready=$(log_ms "$dp_ready_write")
[[ -n $t_loaded && -n $t_ready && -n $t_dp_ready ]] || fail "the controller's log lacks the Loaded report or a label write"
note "figure: Loaded report -> .ready label written: $((t_ready - t_loaded)) ms (kmodd)"
note "figure: .ready label -> plugin Pod Ready (its .device-plugin-ready written): $((t_dp_ready - t_ready)) ms (DaemonSet controller, kubelet, plugin start)"
note "figure: Loaded report -> kmodd.test/widget allocatable (polled every 100 ms): $((t_alloc - t_loaded)) ms"
kubectl create -f - >/dev/null <<YAML || fail "cannot create the Pod uses-widget"
apiVersion: v1
kind: Pod
metadata: {name: uses-widget, namespace: kmm-demo}
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  containers:
  - name: c
    image: $KMODD_NODE_PAUSE_IMAGE
    imagePullPolicy: Never
    command: [/bin/busybox, sh, -c, 'echo "devices=\$KMODD_TEST_DEVICES"; test -n "\$KMODD_TEST_DEVICES"']
    resources: {limits: {kmodd.test/widget: "1"}}
YAML
eventually 120 bash -c "[[ \$(kubectl get pod -n kmm-demo uses-widget -o jsonpath='{.status.phase}') =~ ^(Succeeded|Failed)\$ ]]" \
  || fail "Pod uses-widget never finished"
[[ $(kubectl get pod -n kmm-demo uses-widget -o jsonpath='{.status.phase}') == Succeeded ]] \
  || fail "Pod uses-widget failed: no device from the plugin's Allocate"
note "1. created: kmm_ci_fw Loaded, .ready, plugin Pod Ready, widget allocatable 3, status.devicePlugin 1/1/1, a Pod used a widget"

# --- bad input: a plugin spec the API server refuses ---------------------------------------------
dp_condition() { kubectl get module -n kmm-demo kmm-ci -o jsonpath='{.status.conditions[?(@.type=="DevicePluginAccepted")].status} {.status.conditions[?(@.type=="DevicePluginAccepted")].message}'; }
dp_refused() { [[ $(dp_condition) == "False "*"quantities must match"* ]]; }
dp_accepted() { [[ $(dp_condition) == "True "* ]]; }
dp_accepted || fail "DevicePluginAccepted is not True: '$(dp_condition)'"
module_apply v1 lots || fail "cannot give the plugin a bad CPU limit"
eventually 30 dp_refused || fail "no DevicePluginAccepted=False with the API server's words: '$(dp_condition)'"
eventually 20 bash -c "kubectl get events -n kmm-demo --field-selector reason=DevicePluginRefused -o jsonpath='{.items[*].message}' | grep -q 'quantities must match'" \
  || fail "no DevicePluginRefused Event"
has_label "$pfx.ready" || fail "a refused plugin took the module's .ready label"
[[ $(loader kmm-ci) == 1/1/1 ]] || fail "a refused plugin changed status.moduleLoader: $(loader kmm-ci)"
plugin_ready || fail "a refused update took the running plugin away"
module_apply v1 || fail "cannot restore the plugin"
eventually 30 dp_accepted || fail "DevicePluginAccepted did not come back: '$(dp_condition)'"
note "bad input: the refused DaemonSet is DevicePluginAccepted=False and a DevicePluginRefused Event with the API server's words; the module and the running plugin unaffected"

# --- 2. cordon -------------------------------------------------------------------------------
kubectl cordon "$node" >/dev/null
eventually 30 no_label "$pfx.device-plugin-target" || fail "cordoned: the target label stayed"
eventually 60 no_plugin_pod || fail "cordoned: the plugin Pod stayed: $(plugin_pods)"
eventually 30 no_label "$pfx.device-plugin-ready" || fail "cordoned: .device-plugin-ready stayed"
has_label "$pfx.ready" || fail "cordoned: the module's .ready label went"
[[ $(loader kmm-ci) == 1/1/1 ]] || fail "cordoned: status.moduleLoader is $(loader kmm-ci), want 1/1/1 (the module stays loaded)"
kubectl uncordon "$node" >/dev/null
eventually 120 plugin_ready || fail "uncordoned: the plugin Pod did not come back"
eventually 30 has_label "$pfx.device-plugin-ready" || fail "uncordoned: no .device-plugin-ready"
note "2. cordon: the plugin Pod evicted, kmm_ci_fw still loaded; uncordon: the Pod back"

# --- 3. ordered upgrade v1 -> v2 ----------------------------------------------------------------
module_apply v2 || fail "cannot update the Module to v2"
eventually 30 bash -c "[[ \$(kubectl get daemonsets -n kmm-demo -l kmm.node.kubernetes.io/module.name=kmm-ci -o name | wc -l) == 2 ]]" \
  || fail "no v2 DaemonSet beside v1's: $(daemonsets)"
[[ $(label "$pfx.version.ready") == v1 ]] || fail "the node left v1 before its label said so"
t_relabel=$(ms)
kubectl label node "$node" --overwrite kmm.node.kubernetes.io/version-module.kmm-demo.kmm-ci=v2 >/dev/null
eventually 240 bash -c "[[ \$(kubectl get node $node -o jsonpath='{.metadata.labels.kmm\.node\.kubernetes\.io/kmm-demo\.kmm-ci\.version\.ready}') == v2 ]]" \
  || fail "the node never reported v2 ready"
eventually 180 plugin_ready || fail "no v2 plugin Pod Ready"
eventually 30 has_label "$pfx.device-plugin-ready" || fail "no .device-plugin-ready after the upgrade"
eventually 60 bash -c "[[ \$(kubectl get daemonsets -n kmm-demo -l kmm.node.kubernetes.io/module.name=kmm-ci -o name | wc -l) == 1 ]]" \
  || fail "the v1 DaemonSet was not deleted: $(daemonsets)"
[[ $(label beta.kmm.node.kubernetes.io/version-schedule-pod.kmm-demo.kmm-ci) == v2 ]] || fail "version-schedule-pod is not v2"
swap_order upgrade "$t_relabel" "$on_node" "e.get('version') == 'v2'" "$dp_ready_write"
# Between the relabel and the Pod gone, the node said nothing but Loaded v1.
only_loaded v1 "$t_relabel" "$t_gone" || fail "the module changed on the node before its plugin Pod was gone"
note "3. upgrade: plugin Pod gone < agent on v2 < v2 Loaded < v2 plugin Ready; v1 DaemonSet deleted"

# --- 3b. the controller restarted in the middle: back to v1 --------------------------------------
# Killed while v2 and its plugin run, the Module and the node's label moved back to v1 while
# it is down; the new controller has no entry of its own to keep the node at: it sends the
# node nothing until the v2 plugin Pod is gone, then v1.
# shellcheck disable=SC2154  # ctl_pid: kube_guest_controller sets it
kill -KILL "$ctl_pid"
wait "$ctl_pid" 2>/dev/null
module_apply v1 || fail "cannot move the Module back to v1"
kubectl label node "$node" --overwrite kmm.node.kubernetes.io/version-module.kmm-demo.kmm-ci=v1 >/dev/null
t_restart=$(ms)
kube_guest_controller "$ns" "$ctl_port" "$tmp/controller2.log"
ctl_log=$tmp/controller2.log
eventually 240 bash -c "[[ \$(kubectl get node $node -o jsonpath='{.metadata.labels.kmm\.node\.kubernetes\.io/kmm-demo\.kmm-ci\.version\.ready}') == v1 ]]" \
  || fail "after the restart, the node never reported v1 ready"
eventually 180 plugin_ready || fail "after the restart, no v1 plugin Pod Ready"
t_gone=$(log_ms "$on_node and e.get('msg') == 'plugin Pod gone: the node is sent its first desired state'" "$t_restart")
t_v1=$(log_ms "$on_node and e.get('msg') == 'module phase' and e.get('version') == 'v1'" "$t_restart")
t_v1_loaded=$(log_ms "$on_node and e.get('msg') == 'module phase' and e.get('version') == 'v1' and e.get('phase') == 'Loaded'" "$t_restart")
note "restart timeline (ms after the new controller's start): plugin Pod gone $((t_gone - t_restart)), agent on v1 $((t_v1 - t_restart)), v1 Loaded $((t_v1_loaded - t_restart))"
[[ -n $t_gone && -n $t_v1 && -n $t_v1_loaded ]] || fail "a step after the restart is missing from the new controller's log"
((t_gone < t_v1 && t_v1 <= t_v1_loaded)) || fail "after the restart: Pod gone $t_gone, v1 $t_v1, v1 Loaded $t_v1_loaded"
only_loaded v2 "$t_restart" "$t_gone" || fail "after the restart, the module changed before its plugin Pod was gone"
eventually 60 bash -c "[[ \$(kubectl get daemonsets -n kmm-demo -l kmm.node.kubernetes.io/module.name=kmm-ci -o name | wc -l) == 1 ]]" \
  || fail "after the restart, the v2 DaemonSet was not deleted: $(daemonsets)"
note "3b. restart: the new controller sent v1 only once the v2 plugin Pod was gone"

# --- 3c. a plain image change of an unversioned Module: the plugin leaves first too -------------
# KMM swaps such a driver under its running plugin; kmodd drains the plugin off the node first.
a_pods() { kubectl get pods -n kmm-demo -l kmm.node.kubernetes.io/module.name=kmm-ci-a,kmm.node.kubernetes.io/role=device-plugin -o json; }
a_ready() { [[ $(a_pods | jq '[.items[] | select(.metadata.deletionTimestamp == null) | select(.status.conditions[]? | .type == "Ready" and .status == "True")] | length') == 1 ]]; }
a_apply() {  # a_apply TAG: Module kmm-ci-a (kmm_ci_a, no version) from image TAG, with a plugin
  kubectl apply -f - >/dev/null <<YAML
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: kmm-ci-a, namespace: kmm-demo}
spec:
  selector: {kmodd.io/demo: "true"}
  devicePlugin:
    container:
      image: $KMODD_TEST_DEVICE_PLUGIN_IMAGE
      args: [--resource, gadget, --count, "2", --poll-interval-ms, "200"]
  moduleLoader:
    container:
      imagePullPolicy: IfNotPresent
      modprobe: {moduleName: kmm_ci_a}
      kernelMappings:
        - regexp: '^.+\$'
          containerImage: "10.0.2.2:$reg_port/kmodd/kmm-ci:$1-\$KERNEL_FULL_VERSION"
          registryTLS: {insecure: true}
YAML
}
on_a="e.get('node') == '$node' and e.get('module') == 'kmm-demo/kmm-ci-a'"
a_apply v1 || fail "cannot create Module kmm-ci-a"
eventually 120 has_label kmm.node.kubernetes.io/kmm-demo.kmm-ci-a.ready || fail "kmm-ci-a: no .ready"
eventually 120 a_ready || fail "kmm-ci-a: its plugin Pod is not Ready"
eventually 60 bash -c "[[ \$(kubectl get node $node -o jsonpath='{.status.allocatable.kmodd\.test/gadget}') == 2 ]]" \
  || fail "kmm-ci-a: kmodd.test/gadget never allocatable"
t_image=$(ms)
a_apply v2 || fail "cannot change kmm-ci-a's image"
eventually 120 bash -c "kubectl get module -n kmm-demo kmm-ci-a -o json | jq -e --arg n $node --arg d '$digest_v2' '.status.nodes[] | select(.node == \$n and .phase == \"Loaded\" and .imageDigest == \$d)' >/dev/null" \
  || fail "kmm-ci-a: never Loaded from v2: $(kubectl get module -n kmm-demo kmm-ci-a -o jsonpath='{.status.nodes}')"
eventually 120 a_ready || fail "kmm-ci-a: no plugin Pod Ready after the image change"
a_dp_write="e.get('msg', '').startswith('node labels updated') and e.get('node') == '$node' and '\"kmm.node.kubernetes.io/kmm-demo.kmm-ci-a.device-plugin-ready\":\"\"' in e.get('patch', '')"
swap_order "image change" "$t_image" "$on_a" "':v2-' in e.get('image', '')" "$a_dp_write"
kubectl delete module -n kmm-demo kmm-ci-a --wait=false >/dev/null || fail "cannot delete kmm-ci-a"
eventually 120 bash -c "! kubectl get module -n kmm-demo kmm-ci-a" || fail "kmm-ci-a is still there"
eventually 30 no_label kmm.node.kubernetes.io/kmm-demo.kmm-ci-a.ready || fail "kmm-ci-a: .ready stayed"
note "3c. plain image change: plugin Pod gone < agent on the new image < Loaded < plugin Ready"

# --- 3d. drain through the Eviction API, a PodDisruptionBudget honoured ----------------------------
kubectl apply -f - >/dev/null <<YAML || fail "cannot create the ModulePolicy with a drain"
apiVersion: kmodd.io/v1alpha1
kind: ModulePolicy
metadata: {name: kmm-ci, namespace: kmm-demo}
spec:
  moduleName: kmm-ci
  drain:
    resources: [kmodd.test/widget]
    timeoutSeconds: 300
YAML
eventually 120 plugin_ready || fail "drain: no plugin Pod Ready before the drain"
until [[ $(allocatable) == 3 ]]; do sleep 0.2; done
kubectl create -f - >/dev/null <<YAML || fail "cannot create the Pod widget-user and its budget"
apiVersion: v1
kind: Pod
metadata: {name: widget-user, namespace: kmm-demo, labels: {app: widget-user}}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: $KMODD_NODE_PAUSE_IMAGE
    imagePullPolicy: Never
    command: [/bin/busybox, sleep, "3600"]
    resources: {limits: {kmodd.test/widget: "1"}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: widget-user, namespace: kmm-demo}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: widget-user}}
YAML
eventually 120 bash -c "[[ \$(kubectl get pod -n kmm-demo widget-user -o jsonpath='{.status.phase}') == Running ]]" \
  || fail "drain: the Pod widget-user never ran"
eventually 60 bash -c "[[ \$(kubectl get pdb -n kmm-demo widget-user -o jsonpath='{.status.currentHealthy}/{.status.disruptionsAllowed}') == 1/0 ]]" \
  || fail "drain: the budget never counted the Pod: $(kubectl get pdb -n kmm-demo widget-user -o jsonpath='{.status}')"
cordoned() { [[ $(kubectl get node "$node" -o jsonpath='{.spec.unschedulable}') == true ]]; }
cordon_mark() { kubectl get node "$node" -o json | jq -r '.metadata.annotations["kmodd.io/cordoned-for"] // "<none>"'; }
t_drain=$(ms)
module_apply v2 || fail "drain: cannot update the Module to v2"
kubectl label node "$node" --overwrite kmm.node.kubernetes.io/version-module.kmm-demo.kmm-ci=v2 >/dev/null
eventually 60 cordoned || fail "drain: the node was not cordoned"
[[ $(cordon_mark) == kmm-demo/kmm-ci ]] || fail "drain: the cordon is not marked: $(cordon_mark)"
eventually 60 bash -c "grep -q '\"drain: eviction refused' '$ctl_log'" || fail "drain: no refused eviction in the controller's log"
sleep 5  # the budget stands: the node keeps v1 and the Pod runs
[[ $(label "$pfx.version.ready") == v1 ]] || fail "drain: the node left v1 while the budget held its Pod"
[[ $(kubectl get pod -n kmm-demo widget-user -o jsonpath='{.status.phase}') == Running ]] \
  || fail "drain: widget-user did not keep running under its budget"
t_pdb=$(ms)
kubectl delete pdb -n kmm-demo widget-user >/dev/null || fail "drain: cannot delete the budget"
eventually 120 bash -c "! kubectl get pod -n kmm-demo widget-user >/dev/null 2>&1" || fail "drain: widget-user was not evicted"
eventually 240 bash -c "[[ \$(kubectl get node $node -o jsonpath='{.metadata.labels.kmm\.node\.kubernetes\.io/kmm-demo\.kmm-ci\.version\.ready}') == v2 ]]" \
  || fail "drain: the node never reported v2 ready"
eventually 60 bash -c "! [[ \$(kubectl get node $node -o jsonpath='{.spec.unschedulable}') == true ]]" || fail "drain: the node stayed cordoned"
[[ $(cordon_mark) == "<none>" ]] || fail "drain: the cordon mark stayed: $(cordon_mark)"
t_refused=$(log_ms "$on_node and e.get('msg', '').startswith('drain: eviction refused') and e.get('pod') == 'kmm-demo/widget-user'" "$t_drain")
t_evicted=$(log_ms "$on_node and e.get('msg') == 'drain: Pod evicted' and e.get('pod') == 'kmm-demo/widget-user'" "$t_drain")
t_drained=$(log_ms "$on_node and e.get('msg', '').startswith('rollout: node drained')" "$t_drain")
t_v2=$(log_ms "$on_node and e.get('msg') == 'module phase' and e.get('version') == 'v2'" "$t_drain")
t_uncordon=$(log_ms "$on_node and e.get('msg', '').startswith('drain: node uncordoned')" "$t_drain")
note "drain timeline (ms after the upgrade): eviction refused $((t_refused - t_drain)), budget deleted $((t_pdb - t_drain)), evicted $((t_evicted - t_drain)), drained $((t_drained - t_drain)), agent on v2 $((t_v2 - t_drain)), uncordoned $((t_uncordon - t_drain))"
[[ -n $t_refused && -n $t_evicted && -n $t_drained && -n $t_v2 && -n $t_uncordon ]] \
  || fail "drain: a step is missing from the controller's log"
((t_refused < t_pdb && t_pdb <= t_evicted && t_evicted < t_drained && t_drained < t_v2 && t_v2 < t_uncordon)) \
  || fail "drain: the order is wrong"
only_loaded v1 "$t_drain" "$t_drained" || fail "drain: the module changed on the node before it was drained"
# A node a person cordoned: drained (nothing to evict now) and moved back to v1, left cordoned.
kubectl cordon "$node" >/dev/null
t_person=$(ms)
module_apply v1 || fail "drain: cannot move the Module back to v1"
kubectl label node "$node" --overwrite kmm.node.kubernetes.io/version-module.kmm-demo.kmm-ci=v1 >/dev/null
eventually 240 bash -c "[[ \$(kubectl get node $node -o jsonpath='{.metadata.labels.kmm\.node\.kubernetes\.io/kmm-demo\.kmm-ci\.version\.ready}') == v1 ]]" \
  || fail "drain: the cordoned node never reported v1 ready"
[[ -n $(log_ms "$on_node and e.get('msg', '').startswith('drain: the node is cordoned already')" "$t_person") ]] \
  || fail "drain: the controller did not see the person's cordon"
sleep 3
cordoned || fail "drain: kmodd uncordoned a node a person had cordoned"
kubectl uncordon "$node" >/dev/null
kubectl delete modulepolicy -n kmm-demo kmm-ci >/dev/null || fail "cannot delete the ModulePolicy"
eventually 120 plugin_ready || fail "drain: the plugin Pod did not come back"
note "3d. drain: cordoned (marked), eviction refused by the budget and v1 kept, budget deleted < evicted < drained < v2 < uncordoned; a person's cordon kept"

# --- the DRA Module: live all along, then deleted ---------------------------------------------------
eventually 60 dra_ready || fail "the DRA driver's Pod is not Ready: $(dra_pods | jq -c '[.items[].status]')"
# Past the liveness probe's first checks (initial delay 30 s, every 10 s): never restarted.
while (( $(ms) - t_dra < 45000 )); do sleep 1; done
dra_ready || fail "the DRA driver's Pod is no longer Ready"
[[ $(dra_pods | jq '[.items[].status.containerStatuses[]?.restartCount] | add') == 0 ]] \
  || fail "the DRA driver's Pod restarted (its gRPC liveness probe failed?): $(kubectl get events -n kmm-demo --field-selector reason=Unhealthy -o jsonpath='{.items[*].message}')"
[[ $(dra_pods | jq -r '.items[0].spec.hostNetwork') == true ]] || fail "the DRA Pod is not on the host network"
eventually 30 has_label kmm.node.kubernetes.io/kmm-demo.kmm-ci-dra.dra-ready || fail "no .dra-ready label"
dra_status() { kubectl get module -n kmm-demo kmm-ci-dra -o jsonpath='{.status.dra.nodesMatchingSelectorNumber}/{.status.dra.desiredNumber}/{.status.dra.availableNumber}'; }
eventually 30 bash -c "[[ \$(kubectl get module -n kmm-demo kmm-ci-dra -o jsonpath='{.status.dra.availableNumber}') == 1 ]]" \
  || fail "status.dra is $(dra_status), want 1/1/1"
[[ $(dra_status) == 1/1/1 ]] || fail "status.dra is $(dra_status), want 1/1/1"
kubectl get deviceclass widget.dra.kmodd.test >/dev/null || fail "no DeviceClass widget.dra.kmodd.test"
kubectl delete module -n kmm-demo kmm-ci-dra --wait=false >/dev/null || fail "cannot delete the DRA Module"
eventually 60 bash -c "! kubectl get module -n kmm-demo kmm-ci-dra" || fail "the DRA Module is still there"
eventually 60 bash -c "[[ \$(kubectl get pods -n kmm-demo -l kmm.node.kubernetes.io/role=dra -o name | wc -l) == 0 ]]" \
  || fail "the DRA Pod stayed"
eventually 30 bash -c "! kubectl get deviceclass widget.dra.kmodd.test" || fail "the DeviceClass stayed"
eventually 30 no_label kmm.node.kubernetes.io/kmm-demo.kmm-ci-dra.dra-ready || fail ".dra-ready stayed"
no_label kmm.node.kubernetes.io/kmm-demo.kmm-ci-dra.dra-target || fail ".dra-target stayed"
note "DRA: the driver's Pod ran on the node on the host network, live past its gRPC probe, .dra-ready, status.dra 1/1/1, its DeviceClass; deleted, all gone"

# --- 4. delete ----------------------------------------------------------------------------------
t_delete=$(ms)
kubectl delete module -n kmm-demo kmm-ci --wait=false >/dev/null || fail "cannot delete the Module"
eventually 180 bash -c "! kubectl get module -n kmm-demo kmm-ci" || fail "the Module is still there"
t_ds_deleted=$(log_ms "e.get('msg') == 'device plugin DaemonSet deleted'" "$t_delete")
t_gone=$(log_ms "$on_node and e.get('msg') == \"plugin Pod gone: the node is sent the module's plan\"" "$t_delete")
t_unloaded=$(log_ms "$on_node and e.get('msg') == 'module phase' and e.get('phase') == 'Gone'" "$t_delete")
t_released=$(log_ms "e.get('msg', '').endswith('finalizer removed')" "$t_delete")
note "delete timeline (ms): DaemonSet deleted $((t_ds_deleted - t_delete)), plugin Pod gone $((t_gone - t_delete)), unloaded $((t_unloaded - t_delete)), finalizer removed $((t_released - t_delete))"
[[ -n $t_ds_deleted && -n $t_gone && -n $t_unloaded && -n $t_released ]] || fail "a step of the delete is missing from the controller's log"
((t_ds_deleted <= t_gone && t_gone < t_unloaded && t_unloaded <= t_released)) \
  || fail "the delete's order is wrong: DaemonSet $t_ds_deleted, Pod gone $t_gone, unloaded $t_unloaded, finalizer $t_released"
eventually 30 bash -c "[[ -z \$(kubectl get daemonsets -n kmm-demo -l kmm.node.kubernetes.io/module.name=kmm-ci -o name) ]]" \
  || fail "DaemonSets left: $(daemonsets)"
left=$(kubectl get node "$node" -o json | jq -r '[.metadata.labels | keys[] | select(startswith("kmm.node.kubernetes.io/") or startswith("beta.kmm.node.kubernetes.io/")) | select(startswith("kmm.node.kubernetes.io/version-module.") | not)] | join(", ")')
[[ -z $left ]] || fail "labels left on $node: $left"
note "4. delete: DaemonSet deleted < plugin Pod gone < unloaded < finalizer removed; nothing left"

step "done"
wait "$vm_pid"
vm_rc=$?
[[ $vm_rc == 0 ]] || { show "$tmp/vm1.err"; fail "guest script exit $vm_rc"; }
[[ -z $(sec "$tmp/vm1.out" done.modules) ]] || fail "kmm_ci_fw still loaded in the VM after the delete"
# The VM's kernel log: loaded (v1), unloaded, loaded (v2), unloaded, loaded (v1 again, after
# the restart), unloaded, loaded (v2, drained), unloaded, loaded (v1, the person's cordon),
# unloaded (the delete), in that order.
seq=$(grep -oE "kmm_ci_fw: (firmware kmm_ci_fw/fw.bin loaded|unloaded)" "$tmp/dmesg1" | sed -e 's/.*: //' -e 's/firmware.*/loaded/' | tr '\n' ',')
[[ $seq == "loaded,unloaded,loaded,unloaded,loaded,unloaded,loaded,unloaded,loaded,unloaded," ]] \
  || { show "$tmp/dmesg1"; fail "the VM's kernel log has $seq"; }
note "the VM's kernel: v1, v2, v1 (restart), v2 (drained), v1 (cordoned), each loaded then unloaded"
echo "PASS: $case_name"

#!/usr/bin/env bash
# deploy/ against the real thing: images built with buildah and pushed to a real registry,
# manifests applied to a real kube-apiserver (tools/kube), then uninstalled.
#
# usage: tests/deploy/deploy_test.sh BIN_DIR SOURCE_DIR
#
# There are no nodes and no kubelet: nothing runs. What is checked is what the API server
# decides: every object of deploy/ is accepted (RBAC, PDB, DaemonSet, Deployment, the
# admission policy, the webhook configuration), the CRD is Established and takes every
# example Module with strict field validation and without pruning a field (it adds only
# the CRD's defaults, such as dirName /opt), the status
# subresource and printer columns work, the controller's own token reads Secrets only in
# the namespaces given to it and creates none, the admission policy confines the
# controller's writes (labels, owner references, finalizers), the webhook configuration
# fails closed while no controller serves it, and the uninstall leaves nothing. What is
# installed is deploy/overlays/example (the base, pull-secret Roles for two more
# namespaces, the NetworkPolicy) with the images set. Fails (never skips) when buildah,
# the registry or the API server harness is missing.
set -euo pipefail

bin=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
py=/usr/bin/python3
kube="$py $src/tests/deploy/kube.py"
step() { echo "== $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source=tests/lib/harness.bash
source "$src/tests/lib/harness.bash"
declare work
make_temp_dir work kmodd-deploy-test KEEP

require_tools buildah
$py -c 'import yaml' || fail "python3-yaml is missing (tools/bootstrap installs it)"
[ -x "$src/tools/kube/start" ] || fail "tools/kube/start is missing"
require_bins "$bin" kmodd-agent kmodd-controller

step "the CRD file is what deploy/crd/generate.py writes"
$py "$src/deploy/crd/generate.py" --check

step "registry and API server"
registry_start "$work/reg"
if ! eval "$("$src/tools/kube/setup" 2>"$work/kube-setup.log")"; then
  cat "$work/kube-setup.log" >&2; fail "tools/kube/setup failed"
fi
export KMODD_KUBE_APISERVER KMODD_KUBE_ETCD
kube_start "$work/kube"

step "images: build and push"
t0=$EPOCHREALTIME
"$src/tools/images/build" --bin "$bin" --work "$work/images" "$KMODD_REGISTRY" >"$work/images.env" \
  || fail "tools/images/build failed"
t1=$EPOCHREALTIME
cat "$work/images.env"
# shellcheck source=/dev/null
source "$work/images.env"
awk "BEGIN {printf \"images built and pushed in %.1f s\n\", $t1 - $t0}"
for v in KMODD_AGENT_IMAGE KMODD_CONTROLLER_IMAGE; do
  [[ ${!v} == "$KMODD_REGISTRY"/kmodd/*@sha256:* ]] || fail "$v=${!v} is not a digest reference"
done
for v in KMODD_AGENT_IMAGE_SIZE KMODD_CONTROLLER_IMAGE_SIZE; do
  [ "${!v}" -lt $((40 * 1024 * 1024)) ] || fail "$v=${!v}: larger than 40 MiB compressed"
done

step "images: pulled back by digest, they run (chroot isolation, no daemon)"
s=(--storage-driver vfs --root "$work/pull/storage" --runroot "$work/pull/run")
ctr=$(buildah "${s[@]}" from -q --tls-verify=false "$KMODD_CONTROLLER_IMAGE")
buildah "${s[@]}" copy "$ctr" "$src/examples/modules/single.yaml" /tmp/single.yaml >/dev/null
buildah "${s[@]}" run --isolation chroot "$ctr" -- /usr/bin/kmodd-controller validate -f /tmp/single.yaml \
  || fail "the controller image cannot validate a Module"
user=$(buildah "${s[@]}" inspect --format '{{.OCIv1.Config.User}}' "$KMODD_CONTROLLER_IMAGE")
[ "$user" = "65532:65532" ] || fail "the controller image runs as '$user', not 65532:65532"
agt=$(buildah "${s[@]}" from -q --tls-verify=false "$KMODD_AGENT_IMAGE")
buildah "${s[@]}" run --isolation chroot "$agt" -- /usr/bin/kmodd-agent --help >"$work/agent-help" 2>&1 || true
grep -q 'run the agent' "$work/agent-help" || { cat "$work/agent-help"; fail "the agent image does not run"; }
buildah "${s[@]}" rm --all >/dev/null

step "render deploy/overlays/example, and deploy/base alone, with the digests (an overlay's images:)"
overlay() {  # DIR BASE: a kustomization of BASE with the images set
  mkdir -p "$1"
  cat >"$1/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $2
images:
  - {name: kmodd/agent, newName: ${KMODD_AGENT_IMAGE%@*}, digest: ${KMODD_AGENT_IMAGE#*@}}
  - {name: kmodd/controller, newName: ${KMODD_CONTROLLER_IMAGE%@*}, digest: ${KMODD_CONTROLLER_IMAGE#*@}}
EOF
}
overlay "$work/overlay" "$src/deploy/overlays/example"
overlay "$work/overlay-base" "$src/deploy/base"
$kube render "$work/overlay" >"$work/all.yaml"
$kube render "$work/overlay-base" >"$work/base.yaml"
if command -v kubectl >/dev/null; then
  # When kubectl is there, its kustomize must agree with the test's renderer.
  cp -r "$src/deploy" "$work/deploy"
  sed -i "s|  - $src/deploy/|  - ../deploy/|" "$work/overlay/kustomization.yaml"
  kubectl kustomize "$work/overlay" >"$work/all-kubectl.yaml"
  $py - "$work/all.yaml" "$work/all-kubectl.yaml" <<'EOF'
import sys, yaml
key = lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])
a, b = ({key(o): o for o in yaml.safe_load_all(open(p)) if o} for p in sys.argv[1:3])
assert a == b, "kubectl kustomize and tests/deploy/kube.py render differ"
print(f"kubectl kustomize agrees ({len(a)} objects)")
EOF
fi
step "the Helm chart renders the same objects (Helm's engine: Go text/template; see helmrender)"
# Debian has no helm package: tests/deploy/helmrender renders the chart with Go's
# text/template and the few Helm functions the chart uses.
command -v go >/dev/null || fail "go is missing (needed to build tests/deploy/helmrender)"
(cd "$src/tests/deploy/helmrender" && go build -o "$work/helmrender" .) || fail "cannot build helmrender"
$py -c 'import json,sys,yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))' \
  "$src/deploy/helm/kmodd/values.yaml" >"$work/values.json"
cat >"$work/overrides.json" <<EOF
{"agent": {"image": {"repository": "${KMODD_AGENT_IMAGE%@*}", "digest": "${KMODD_AGENT_IMAGE#*@}"}},
 "controller": {"image": {"repository": "${KMODD_CONTROLLER_IMAGE%@*}", "digest": "${KMODD_CONTROLLER_IMAGE#*@}"}}}
EOF
# What deploy/overlays/example adds, as Helm values.
cat >"$work/overrides-example.json" <<EOF
{"moduleNamespaces": ["net-drivers", "intel-gpu"],
 "networkPolicy": {"enabled": true, "nodeCIDRs": ["10.0.0.0/16"]}}
EOF
"$work/helmrender" "$src/deploy/helm/kmodd" kmodd-system "$work/values.json" "$work/overrides.json" >"$work/helm-base.yaml" \
  || fail "the chart does not render"
"$work/helmrender" "$src/deploy/helm/kmodd" kmodd-system "$work/values.json" "$work/overrides.json" \
  "$work/overrides-example.json" >"$work/helm.yaml" || fail "the chart does not render with the example's values"
echo '{"networkPolicy": {"enabled": true}}' >"$work/overrides-bad.json"
if out=$("$work/helmrender" "$src/deploy/helm/kmodd" kmodd-system "$work/values.json" "$work/overrides.json" \
         "$work/overrides-bad.json" 2>&1); then
  fail "the chart renders a NetworkPolicy without nodeCIDRs"
fi
grep -q 'networkPolicy.enabled needs networkPolicy.nodeCIDRs' <<<"$out" || fail "unexpected refusal: $out"
same() {  # KUSTOMIZE.yaml HELM.yaml WHAT
  $py - "$1" "$2" "$src"/deploy/helm/kmodd/crds/*.yaml "$3" <<'EOF'
import json, sys, yaml
key = lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])
kust = {key(o): o for o in yaml.safe_load_all(open(sys.argv[1])) if o and o["kind"] != "Namespace"}
helm = {key(o): o for p in sys.argv[2:-1] for o in yaml.safe_load_all(open(p)) if o}
for k in sorted(set(kust) | set(helm)):
    if kust.get(k) != helm.get(k):
        sys.exit(f"Helm and kustomize differ on {k}:\n{json.dumps(helm.get(k))}\n{json.dumps(kust.get(k))}")
print(f"{sys.argv[-1]} agree ({len(helm)} objects; the Namespace is Helm's --create-namespace)")
EOF
}
same "$work/base.yaml" "$work/helm-base.yaml" "the Helm chart's defaults and the kustomize base"
same "$work/all.yaml" "$work/helm.yaml" "the Helm chart with moduleNamespaces and networkPolicy, and deploy/overlays/example"
grep -q "image: $KMODD_AGENT_IMAGE" "$work/all.yaml" || fail "agent image not set by digest"
grep -q "image: $KMODD_CONTROLLER_IMAGE" "$work/all.yaml" || fail "controller image not set by digest"
# The webhook configuration goes last: with failurePolicy Fail and no controller running
# (no kubelet here), it refuses every Module write, as it must.
$py - "$work/all.yaml" "$work/install.yaml" "$work/webhook.yaml" <<'EOF'
import sys, yaml
objs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
hook = [o for o in objs if o["kind"] == "ValidatingWebhookConfiguration"]
rest = [o for o in objs if o["kind"] != "ValidatingWebhookConfiguration"]
assert len(hook) == 1
yaml.safe_dump_all(rest, open(sys.argv[2], "w"), sort_keys=False)
yaml.safe_dump_all(hook, open(sys.argv[3], "w"), sort_keys=False)
EOF

step "the examples' namespaces (the overlay's pull-secret Roles go there), then install: every object accepted (strict field validation)"
: >"$work/examples.yaml"
for f in "$src"/examples/modules/*.yaml; do echo '---' >>"$work/examples.yaml"; cat "$f" >>"$work/examples.yaml"; done
$py - "$work/examples.yaml" "$work/namespaces.yaml" <<'EOF'
import sys, yaml
ns = sorted({o["metadata"].get("namespace", "default") for o in yaml.safe_load_all(open(sys.argv[1])) if o})
yaml.safe_dump_all([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in ns],
                   open(sys.argv[2], "w"))
EOF
$kube apply "$work/namespaces.yaml"
$kube apply "$work/install.yaml"
$kube exists "$work/install.yaml"

step "the CRD is Established"
crd_established() {
  $kube get /apis/apiextensions.k8s.io/v1/customresourcedefinitions/modules.kmm.sigs.x-k8s.io \
    | $py -c 'import json,sys; c={x["type"]:x["status"] for x in json.load(sys.stdin)["status"].get("conditions",[])}; sys.exit(0 if c.get("Established")=="True" else 1)'
}
eventually 10 crd_established || fail "CRD not Established"

step "every example Module is accepted, with nothing pruned"
$kube apply "$work/examples.yaml"
$py - "$work/examples.yaml" <<EOF
import json, subprocess, sys, yaml
sys.path.insert(0, "$src/deploy/crd")
from generate import RULES, expand  # the CRD's defaults, from api/crd_rules.yaml

def default(node, segments, value):
    key, rest = segments[0], segments[1:]
    items = key.endswith("[]")
    key = key[:-2] if items else key
    if not isinstance(node, dict):
        return
    if not rest:
        if node.get(key) is None:
            node[key] = value
        return
    child = node.get(key)
    for c in (child or []) if items else ([child] if child is not None else []):
        default(c, rest, value)

defaults = [(p.split("."), r["default"]) for r in yaml.safe_load(open(RULES))["rules"]
            if "default" in r for p in expand(r["path"])]
for o in yaml.safe_load_all(open(sys.argv[1])):
    if not o:
        continue
    m = o["metadata"]
    got = json.loads(subprocess.check_output(["$py", "$src/tests/deploy/kube.py", "get",
        f"/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/{m['namespace']}/modules/{m['name']}"]))
    for segments, value in defaults:
        default(o, segments, value)
    assert got["spec"] == o["spec"], f"{m['name']}: the API server changed the spec:\n{got['spec']}\n{o['spec']}"
    print(f"Module {m['namespace']}/{m['name']}: spec kept as written, with the CRD's defaults")
EOF

step "a schema error is refused with the field's path"
cat >"$work/bad.yaml" <<'EOF'
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: bad, namespace: kmm-demo}
spec:
  selector: {a: b}
  moduleLoader:
    container:
      modprobe: {moduleName: x}
      kernelMappings:
        - regexp: ['not', 'a', 'string']
EOF
if out=$($kube create-one "$work/bad.yaml"); then fail "a list as regexp was accepted"; fi
echo "$out" | grep -q 'kernelMappings\[0\].regexp' || fail "refusal does not name the field: $out"

step "status subresource and printer columns, written as the controller"
ctrl=system:serviceaccount:kmodd-system:kmodd-controller
mpath=/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/kmm-demo/modules/kmm-ci-a
status='{"status":{"moduleLoader":{"nodesMatchingSelectorNumber":3,"desiredNumber":2,"availableNumber":1},"conditions":[{"type":"Available","status":"False","reason":"NodesNotLoaded","message":"1 of 2 nodes have it loaded"},{"type":"Degraded","status":"False","reason":"AsExpected","message":""}],"nodes":[{"node":"worker-1","phase":"Loaded","message":"","imageDigest":"sha256:00","since":"2026-12-01T02:40:01Z"},{"node":"worker-2","phase":"Pending","message":"waiting for the agent'"'"'s report"}]}}'
r=$($kube request PATCH "$mpath/status" "$status" --as "$ctrl")
echo "$r" | $py -c 'import json,sys; r=json.load(sys.stdin); assert r["code"]==200, r; s=r["body"]["status"]; assert s["moduleLoader"]["availableNumber"]==1 and len(s["nodes"])==2, s' \
  || fail "status patch as the controller: $r"
# A status patch through the main resource does not change status (subresource semantics).
$kube request PATCH "$mpath" '{"status":{"moduleLoader":{"availableNumber":9}}}' >/dev/null
$kube get "$mpath" | $py -c 'import json,sys; assert json.load(sys.stdin)["status"]["moduleLoader"]["availableNumber"]==1' \
  || fail "status changed through the main resource"
$kube request GET "$mpath" >/dev/null
table=$(curl -sf --cacert "$KMODD_KUBE_CA" -H "Authorization: Bearer $KMODD_KUBE_TOKEN" \
  -H 'Accept: application/json;as=Table;v=v1;g=meta.k8s.io' "$KMODD_KUBE_URL$mpath")
echo "$table" | $py -c '
import json, sys
t = json.load(sys.stdin)
cols = [c["name"] for c in t["columnDefinitions"]]
row = dict(zip(cols, t["rows"][0]["cells"]))
print(row)
assert cols == ["Name", "Module", "Version", "Matching", "Desired", "Available", "Degraded", "Age"], cols
assert row["Module"] == "kmm_ci_a" and row["Desired"] == 2 and row["Available"] == 1 and row["Degraded"] == "False", row
' || fail "printer columns"

step "RBAC: the controller can do its job and no more; the agent can do nothing"
can() { # USER VERB RESOURCE-ATTRS-JSON -> prints true/false
  $kube request POST /apis/authorization.k8s.io/v1/subjectaccessreviews \
    "{\"spec\":{\"user\":\"$1\",\"groups\":[\"system:serviceaccounts\",\"system:serviceaccounts:kmodd-system\",\"system:authenticated\"],\"resourceAttributes\":$2}}" \
    | $py -c 'import json,sys; print(str(json.load(sys.stdin)["body"]["status"]["allowed"]).lower())'
}
agent=system:serviceaccount:kmodd-system:kmodd-agent
check() { # EXPECTED USER ATTRS
  got=$(can "$2" "$3")
  [ "$got" = "$1" ] || fail "$2 $3: allowed=$got, expected $1"
  echo "  $1: ${2##*:} $3"
}
check true "$ctrl" '{"verb":"watch","group":"kmm.sigs.x-k8s.io","resource":"modules"}'
check true "$ctrl" '{"verb":"patch","group":"kmm.sigs.x-k8s.io","resource":"modules","subresource":"status","namespace":"any"}'
check true "$ctrl" '{"verb":"patch","resource":"nodes","name":"worker-1"}'
check true "$ctrl" '{"verb":"get","resource":"secrets","namespace":"net-drivers","name":"acme-pull-secret"}'
check false "$ctrl" '{"verb":"list","resource":"secrets","namespace":"net-drivers"}'
check true "$ctrl" '{"verb":"get","resource":"secrets","namespace":"intel-gpu","name":"intel-registry"}'
check true "$ctrl" '{"verb":"get","resource":"secrets","namespace":"kmodd-system","name":"anything"}'
# Secrets only where Modules are (the overlay's namespaces and its own), and no create.
check false "$ctrl" '{"verb":"get","resource":"secrets","namespace":"kube-system","name":"anything"}'
check false "$ctrl" '{"verb":"get","resource":"secrets","namespace":"storage","name":"anything"}'
check false "$ctrl" '{"verb":"create","resource":"secrets","namespace":"kmodd-system"}'
check false "$ctrl" '{"verb":"create","resource":"secrets","namespace":"net-drivers"}'
check false "$ctrl" '{"verb":"create","resource":"configmaps","namespace":"kmodd-system"}'
check true "$ctrl" '{"verb":"update","resource":"configmaps","namespace":"kmodd-system","name":"kmodd-ca"}'
check false "$ctrl" '{"verb":"delete","group":"kmm.sigs.x-k8s.io","resource":"modules","namespace":"kmm-demo"}'
check false "$ctrl" '{"verb":"update","group":"kmm.sigs.x-k8s.io","resource":"modules","namespace":"kmm-demo"}'
check true "$ctrl" '{"verb":"create","group":"authentication.k8s.io","resource":"tokenreviews"}'
check true "$ctrl" '{"verb":"patch","group":"admissionregistration.k8s.io","resource":"validatingwebhookconfigurations","name":"kmodd-module-validation"}'
check false "$ctrl" '{"verb":"patch","group":"admissionregistration.k8s.io","resource":"validatingwebhookconfigurations","name":"someone-else"}'
check true "$ctrl" '{"verb":"update","group":"coordination.k8s.io","resource":"leases","namespace":"kmodd-system","name":"kmodd-controller"}'
check false "$ctrl" '{"verb":"update","group":"coordination.k8s.io","resource":"leases","namespace":"kube-system","name":"kube-scheduler"}'
check true "$ctrl" '{"verb":"update","resource":"secrets","namespace":"kmodd-system","name":"kmodd-controller-tls"}'
check false "$ctrl" '{"verb":"update","resource":"secrets","namespace":"kmodd-system","name":"other"}'
check false "$ctrl" '{"verb":"create","resource":"pods","namespace":"kmodd-system"}'
check true "$ctrl" '{"verb":"watch","resource":"pods"}'
check false "$ctrl" '{"verb":"delete","resource":"pods","namespace":"kmm-demo","name":"x"}'
check false "$ctrl" '{"verb":"get","resource":"pods","subresource":"log","namespace":"kmm-demo","name":"x"}'
# Device plugin DaemonSets: where Modules are given to it, nowhere else.
check true "$ctrl" '{"verb":"create","group":"apps","resource":"daemonsets","namespace":"net-drivers"}'
check true "$ctrl" '{"verb":"delete","group":"apps","resource":"daemonsets","namespace":"intel-gpu","name":"x"}'
check false "$ctrl" '{"verb":"create","group":"apps","resource":"daemonsets","namespace":"kube-system"}'
check false "$ctrl" '{"verb":"create","group":"apps","resource":"daemonsets","namespace":"storage"}'
# DeviceClasses of Modules' spec.dra: cluster-scoped (the policy confines them).
check true "$ctrl" '{"verb":"list","group":"resource.k8s.io","resource":"deviceclasses"}'
check true "$ctrl" '{"verb":"create","group":"resource.k8s.io","resource":"deviceclasses"}'
check true "$ctrl" '{"verb":"update","group":"resource.k8s.io","resource":"deviceclasses","name":"x"}'
check true "$ctrl" '{"verb":"delete","group":"resource.k8s.io","resource":"deviceclasses","name":"x"}'
check false "$ctrl" '{"verb":"create","group":"resource.k8s.io","resource":"resourceslices"}'
check false "$ctrl" '{"verb":"create","group":"resource.k8s.io","resource":"resourceclaims","namespace":"net-drivers"}'
check false "$ctrl" '{"verb":"update","resource":"nodes","subresource":"status","name":"worker-1"}'
check false "$agent" '{"verb":"get","resource":"nodes","name":"worker-1"}'
check false "$agent" '{"verb":"get","resource":"secrets","namespace":"kmodd-system","name":"kmodd-controller-tls"}'
check false "$agent" '{"verb":"get","group":"kmm.sigs.x-k8s.io","resource":"modules","namespace":"kmm-demo"}'

step "the controller's own token: Secrets only where Modules are, none created"
# A real token of its service account (TokenRequest), not impersonation: what the API
# server's authenticator, RBAC and the policy make of the controller's own credential.
ctrl_token=$($kube request POST /api/v1/namespaces/kmodd-system/serviceaccounts/kmodd-controller/token \
  '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":600}}' \
  | $py -c 'import json,sys; r=json.load(sys.stdin); assert r["code"] in (200, 201), r; print(r["body"]["status"]["token"])') \
  || fail "no token for the controller's service account"
expect() { # WANT-CODE DESCRIPTION METHOD PATH [BODY]: a request with the controller's token
  r=$(KMODD_KUBE_TOKEN=$ctrl_token $kube request "$3" "$4" "${@:5}")
  code=$(echo "$r" | $py -c 'import json,sys; print(json.load(sys.stdin)["code"])')
  [ "$code" = "$1" ] || fail "$2: HTTP $code, expected $1: $r"
  echo "  $code: $2"
}
whoami=$(KMODD_KUBE_TOKEN=$ctrl_token $kube request POST /apis/authentication.k8s.io/v1/selfsubjectreviews '{}')
echo "$whoami" | grep -q '"username": "system:serviceaccount:kmodd-system:kmodd-controller"' \
  || fail "the token is not the controller's: $whoami"
# What an attacker holding the token would be after: others' Secrets, a token of its own.
cat >"$work/secrets.yaml" <<'EOF'
apiVersion: v1
kind: Secret
metadata: {name: cloud-credentials, namespace: kube-system}
stringData: {key: hunter2}
---
apiVersion: v1
kind: Secret
metadata: {name: database, namespace: storage}
stringData: {password: hunter2}
---
apiVersion: v1
kind: Secret
metadata: {name: acme-pull-secret, namespace: net-drivers}
type: kubernetes.io/dockerconfigjson
stringData: {.dockerconfigjson: '{"auths":{"registry.acme.example":{"auth":"dTpw"}}}'}
EOF
$kube apply "$work/secrets.yaml"
expect 403 "read a Secret in kube-system (no Modules there)" GET /api/v1/namespaces/kube-system/secrets/cloud-credentials
expect 403 "read a Secret in storage (Modules, but not given to it)" GET /api/v1/namespaces/storage/secrets/database
expect 200 "read the pull secret in net-drivers (given to it)" GET /api/v1/namespaces/net-drivers/secrets/acme-pull-secret
expect 403 "list the Secrets of net-drivers" GET /api/v1/namespaces/net-drivers/secrets
expect 403 "create a Secret" POST /api/v1/namespaces/kmodd-system/secrets '{"metadata":{"name":"loot"},"stringData":{"a":"b"}}'
expect 403 "create a token Secret for itself" POST /api/v1/namespaces/kmodd-system/secrets \
  '{"metadata":{"name":"kmodd-controller-forever","annotations":{"kubernetes.io/service-account.name":"kmodd-controller"}},"type":"kubernetes.io/service-account-token"}'
expect 403 "create a ConfigMap" POST /api/v1/namespaces/kmodd-system/configmaps '{"metadata":{"name":"x"}}'
expect 200 "read its certificate's Secret, shipped empty" GET /api/v1/namespaces/kmodd-system/secrets/kmodd-controller-tls
expect 200 "read its CA's ConfigMap, shipped empty" GET /api/v1/namespaces/kmodd-system/configmaps/kmodd-ca

step "the admission policy: no owner reference and no finalizer anywhere the controller writes"
# An owner reference to an object that does not exist: the garbage collector deletes what
# carries it.
owner='{"apiVersion":"v1","kind":"Namespace","name":"gone","uid":"00000000-0000-0000-0000-000000000001"}'
edited() { # PATH PYTHON: the object at PATH as it is now (read with the controller's token), changed by PYTHON on o
  KMODD_KUBE_TOKEN=$ctrl_token $kube get "$1" | $py -c "import json,sys; o=json.load(sys.stdin); $2; print(json.dumps(o))"
}
tls=/api/v1/namespaces/kmodd-system/secrets/kmodd-controller-tls
ca=/api/v1/namespaces/kmodd-system/configmaps/kmodd-ca
expect 200 "fill its Secret" PUT $tls "$(edited $tls "o['data']={'tls.crt':'Yw==','tls.key':'aw==','ca.crt':'Yw=='}")"
expect 403 "give its Secret an owner" PUT $tls "$(edited $tls "o['metadata']['ownerReferences']=[$owner]")"
expect 403 "give its Secret a finalizer" PUT $tls "$(edited $tls "o['metadata']['finalizers']=['example.com/hold']")"
expect 200 "fill its ConfigMap" PUT $ca "$(edited $ca "o['data']={'ca.crt':'c'}")"
expect 403 "give its ConfigMap an owner" PUT $ca "$(edited $ca "o['metadata']['ownerReferences']=[$owner]")"
leases=/apis/coordination.k8s.io/v1/namespaces/kmodd-system/leases
expect 403 "create its Lease with an owner" POST $leases "{\"metadata\":{\"name\":\"kmodd-controller\",\"ownerReferences\":[$owner]},\"spec\":{}}"
expect 201 "create its Lease" POST $leases '{"metadata":{"name":"kmodd-controller"},"spec":{"holderIdentity":"test"}}'
expect 403 "give its Lease a finalizer" PUT $leases/kmodd-controller "$(edited $leases/kmodd-controller "o['metadata']['finalizers']=['example.com/hold']")"
event='"involvedObject":{"kind":"Node","name":"worker-1"},"reason":"ModuleLoaded","message":"m","type":"Normal","source":{"component":"kmm"}'
expect 403 "create an Event with an owner" POST /api/v1/namespaces/default/events "{\"metadata\":{\"name\":\"kmodd-test.1\",\"ownerReferences\":[$owner]},$event}"
expect 201 "create an Event" POST /api/v1/namespaces/default/events "{\"metadata\":{\"name\":\"kmodd-test.1\"},$event}"
# A DaemonSet: only a Module's device plugin, owned by the Module its label names.
ds() { # NAME OWNER-JSON [ROLE]: a DaemonSet labelled for Module ice
  echo "{\"metadata\":{\"name\":\"$1\",\"labels\":{\"kmm.node.kubernetes.io/module.name\":\"ice\",\"kmm.node.kubernetes.io/role\":\"${3:-device-plugin}\"},\"ownerReferences\":[$2]},\"spec\":{\"selector\":{\"matchLabels\":{\"p\":\"ice\"}},\"template\":{\"metadata\":{\"labels\":{\"p\":\"ice\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"r/p:1\"}]}}}}"
}
module_owner() { echo "{\"apiVersion\":\"kmm.sigs.x-k8s.io/v1beta1\",\"kind\":\"Module\",\"name\":\"$1\",\"uid\":\"00000000-0000-0000-0000-000000000002\",\"controller\":true}"; }
dss=/apis/apps/v1/namespaces/net-drivers/daemonsets
expect 403 "create a DaemonSet owned by a Namespace" POST $dss "$(ds dp-a "$owner")"
expect 403 "create a DaemonSet owned by another Module than its label names" POST $dss "$(ds dp-b "$(module_owner other)")"
expect 403 "create a DaemonSet of another role" POST $dss "$(ds dp-c "$(module_owner ice)" module-loader)"
expect 201 "create a Module's device plugin DaemonSet" POST $dss "$(ds dp-d "$(module_owner ice)")"
expect 201 "create a Module's DRA DaemonSet" POST $dss "$(ds dra-d "$(module_owner ice)" dra)"
# (read as the admin: the controller lists DaemonSets, it has no get)
expect 403 "give it a second owner" PUT $dss/dp-d "$($kube get $dss/dp-d | $py -c "import json,sys; o=json.load(sys.stdin); o['metadata']['ownerReferences'].append($owner); print(json.dumps(o))")"
expect 403 "create a DaemonSet in kube-system" POST /apis/apps/v1/namespaces/kube-system/daemonsets "$(ds dp-e "$(module_owner ice)")"

# A DeviceClass: only one labelled as a Module's, and never another's taken over.
dcs=/apis/resource.k8s.io/v1/deviceclasses
dc() { # NAME LABELS-JSON: a DeviceClass
  echo "{\"metadata\":{\"name\":\"$1\",\"labels\":$2},\"spec\":{}}"
}
mod_labels='{"kmm.node.kubernetes.io/module.name":"ice","kmm.node.kubernetes.io/module.namespace":"net-drivers"}'
expect 403 "create a DeviceClass with no Module's labels" POST $dcs "$(dc dc-a '{}')"
expect 403 "create a DeviceClass without the module.namespace label" POST $dcs "$(dc dc-b '{"kmm.node.kubernetes.io/module.name":"ice"}')"
expect 201 "create a Module's DeviceClass" POST $dcs "$(dc dc-c "$mod_labels")"
expect 403 "give it an owner" PUT $dcs/dc-c "$($kube get $dcs/dc-c | $py -c "import json,sys; o=json.load(sys.stdin); o['metadata']['ownerReferences']=[$owner]; print(json.dumps(o))")"
expect 403 "move it to another Module" PUT $dcs/dc-c "$($kube get $dcs/dc-c | $py -c "import json,sys; o=json.load(sys.stdin); o['metadata']['labels']['kmm.node.kubernetes.io/module.name']='other'; print(json.dumps(o))")"
expect 200 "update a Module's DeviceClass" PUT $dcs/dc-c "$($kube get $dcs/dc-c | $py -c "import json,sys; o=json.load(sys.stdin); o['spec']['selectors']=[{'cel':{'expression':'true'}}]; print(json.dumps(o))")"
$kube request POST $dcs "$(dc someone-else '{}')" >/dev/null
expect 403 "take over someone else's DeviceClass" PUT $dcs/someone-else "$($kube get $dcs/someone-else | $py -c "import json,sys; o=json.load(sys.stdin); o['metadata']['labels']=$mod_labels; print(json.dumps(o))")"
expect 403 "delete someone else's DeviceClass" DELETE $dcs/someone-else
expect 200 "delete a Module's DeviceClass" DELETE $dcs/dc-c

step "the admission policy confines the controller's Node and Module writes"
cat >"$work/node.yaml" <<'EOF'
apiVersion: v1
kind: Node
metadata:
  name: worker-1
  labels: {node-role.kubernetes.io/worker: "", team: a}
EOF
$kube apply "$work/node.yaml"
npath=/api/v1/nodes/worker-1
expect 200 "set the ready label" PATCH $npath '{"metadata":{"labels":{"kmm.node.kubernetes.io/kmm-demo.kmm-ci-a.ready":""}}}'
expect 200 "remove it" PATCH $npath '{"metadata":{"labels":{"kmm.node.kubernetes.io/kmm-demo.kmm-ci-a.ready":null}}}'
expect 403 "cordon the node" PATCH $npath '{"spec":{"unschedulable":true}}'
expect 403 "taint the node" PATCH $npath '{"spec":{"taints":[{"key":"x","effect":"NoSchedule"}]}}'
expect 403 "change another label" PATCH $npath '{"metadata":{"labels":{"team":"b"}}}'
expect 403 "remove another label" PATCH $npath '{"metadata":{"labels":{"team":null}}}'
expect 403 "annotate the node" PATCH $npath '{"metadata":{"annotations":{"x":"y"}}}'
expect 403 "give the node an owner (the garbage collector would delete it)" PATCH $npath "{\"metadata\":{\"ownerReferences\":[$owner]}}"
expect 403 "add a finalizer to the node" PATCH $npath '{"metadata":{"finalizers":["example.com/hold"]}}'
$kube request PATCH $npath '{"metadata":{"finalizers":["example.com/hold"]}}' | grep -q '"code": 200' \
  || fail "the admin could not add a finalizer to the node"
expect 403 "remove the node's finalizer" PATCH $npath '{"metadata":{"finalizers":null}}'
expect 200 "and the label patch still goes through" PATCH $npath '{"metadata":{"labels":{"kmm.node.kubernetes.io/kmm-demo.kmm-ci-a.ready":""}}}'
$kube request PATCH $npath '{"metadata":{"finalizers":null}}' >/dev/null
expect 200 "add its finalizer to a Module" PATCH "$mpath" '{"metadata":{"finalizers":["kmodd.io/unload"]}}'
expect 403 "change a Module's spec" PATCH "$mpath" '{"spec":{"selector":{"a":"b"}}}'
expect 200 "remove its finalizer" PATCH "$mpath" '{"metadata":{"finalizers":null}}'
expect 403 "add another finalizer to a Module" PATCH "$mpath" '{"metadata":{"finalizers":["kmodd.io/unload","example.com/other"]}}'
expect 403 "give a Module an owner" PATCH "$mpath" "{\"metadata\":{\"ownerReferences\":[$owner]}}"
$kube request PATCH "$mpath" '{"metadata":{"finalizers":["example.com/other","kmodd.io/unload"]}}' | grep -q '"code": 200' \
  || fail "the admin could not set a Module's finalizers"
expect 200 "remove its finalizer beside another's" PATCH "$mpath" '{"metadata":{"finalizers":["example.com/other"]}}'
expect 403 "remove another's finalizer" PATCH "$mpath" '{"metadata":{"finalizers":null}}'
$kube request PATCH "$mpath" '{"metadata":{"finalizers":null}}' >/dev/null
# An administrator is not confined.
$kube delete "$work/secrets.yaml" >/dev/null
$kube request DELETE $leases/kmodd-controller >/dev/null
$kube request DELETE /api/v1/namespaces/default/events/kmodd-test.1 >/dev/null
r=$($kube request PATCH $npath '{"spec":{"unschedulable":true}}')
echo "$r" | grep -q '"code": 200' || fail "the admin could not cordon: $r"

step "the webhook configuration: accepted, and it fails closed without a controller"
$kube apply "$work/webhook.yaml"
if out=$($kube create-one "$src/examples/modules/single.yaml"); then
  fail "a Module was admitted while no webhook server runs"
fi
echo "$out" | grep -q 'failed calling webhook' || fail "unexpected refusal: $out"
echo "  refused: failed calling webhook (failurePolicy Fail)"

step "uninstall: Modules first, then kmodd; nothing left"
$kube delete "$work/examples.yaml" --wait >/dev/null
$kube delete "$work/webhook.yaml" --wait >/dev/null
$kube delete "$work/install.yaml"
# No kube-controller-manager here: do the namespace controller's last step (its content is
# gone already: checked below) so the Namespace goes.
left=$($kube request GET /api/v1/namespaces/kmodd-system/serviceaccounts)
echo "$left" | $py -c 'import json,sys; assert json.load(sys.stdin)["body"]["items"]==[]' 2>/dev/null \
  || echo "$left" | grep -q '"code": 404' || fail "objects left in kmodd-system: $left"
$kube request PUT /api/v1/namespaces/kmodd-system/finalize \
  '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kmodd-system"},"spec":{"finalizers":[]}}' >/dev/null
no_leftovers() { [ -z "$($kube leftovers "$work/all.yaml")" ]; }
# A CRD goes only after the API server's own finalizer (customresourcecleanup) has listed and
# deleted its instances: seconds when idle, but CI saw modulepolicies.kmodd.io outlive 10 s
# while other suites loaded both cores. What is left is named below, with the CRDs' conditions.
eventually 90 no_leftovers || true
left=$($kube leftovers "$work/all.yaml")
if [ -n "$left" ]; then
  $kube get /apis/apiextensions.k8s.io/v1/customresourcedefinitions?labelSelector=app.kubernetes.io/name=kmodd \
    | $py -c 'import json,sys
for c in json.load(sys.stdin)["items"]:
    print(c["metadata"]["name"], c["metadata"].get("deletionTimestamp"), c["metadata"].get("finalizers"),
          [(x["type"], x["status"], x.get("message")) for x in c.get("status", {}).get("conditions", [])])' >&2 || true
  fail "left after uninstall: $left"
fi
# Nothing kmodd's under any name: cluster-scoped kinds by label, and the API group.
for p in /apis/rbac.authorization.k8s.io/v1/clusterroles /apis/rbac.authorization.k8s.io/v1/clusterrolebindings \
         /apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations \
         /apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies \
         /apis/apiextensions.k8s.io/v1/customresourcedefinitions; do
  n=$($kube get "$p?labelSelector=app.kubernetes.io/name=kmodd" | $py -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')
  [ "$n" = 0 ] || fail "$n kmodd objects left in $p"
done
api_gone() { ! $kube get /apis/kmm.sigs.x-k8s.io/v1beta1 >/dev/null 2>&1; }
eventually 10 api_gone || fail "the kmm.sigs.x-k8s.io API is still served"
echo "nothing left"

echo "deploy test: passed"

#!/usr/bin/env bash
# KMM's PreflightValidation served by `kmodd-controller run --kubernetes` against a real
# kube-apiserver (tools/kube) and a real registry (tools/registry, the real test modules for
# the VM's kernel), as deployed (deploy/'s RBAC and admission policy, the controller's own
# service account): every Module gets its verdict in status.modules[] (Success for a good
# image; Failure at once for a missing image, never an endless InProgress; Failure for no
# mapping; Failure naming a missing pull Secret), the same verdicts from `preflight
# --kubernetes`, an edit of the spec checks again, an object kmodd cannot act on is logged
# and left alone; then `sign --kubernetes` with the key and certificate from the Module's
# Secrets, which preflight then finds signed. Fails, never skips, without the
# harness, the registry tools or the rig.
#
# usage: kube_preflight_test.sh BIN_DIR SOURCE_DIR
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
make_temp_dir dir kmodd-kube-preflight KEEP
require_tools /usr/bin/docker-registry umoci skopeo python3
for v in KMODD_VM_KERNEL KMODD_TEST_IMAGE; do
  [[ -n ${!v:-} ]] || fail "$v is not set: run tools/vm/setup and export what it prints (tools/test does)"
done
K=$KMODD_VM_KERNEL

step "registry with the test modules' image; API server, CRDs, deploy/'s RBAC"
registry_start "$dir/reg" http
"$src/tools/registry/push-image" "$KMODD_REGISTRY_DIR" kmodd/pf:good --layer "$KMODD_TEST_IMAGE" >/dev/null 2>"$dir/push.log" \
  || fail "push-image failed"
kube_start "$dir/kube"
k() { kube_admin "$@"; }
# shellcheck source=tests/controller/as_deployed.sh
source "$src/tests/controller/as_deployed.sh"
kube_crd_install
k create namespace kmodd-system >/dev/null
k create namespace kmm-demo >/dev/null
as_deployed "$src" "$dir/controller.kubeconfig" kmm-demo || fail "cannot set up deploy/'s RBAC and policy"
module() {  # module NAME MAPPING IMAGE [SECRET]
  local secret=""
  [[ -n ${4:-} ]] && secret="imageRepoSecret: {name: $4}"
  k apply -f - >/dev/null <<YAML
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: $1, namespace: kmm-demo}
spec:
  selector: {kmodd.io/preflight: "true"}
  $secret
  moduleLoader:
    container:
      modprobe: {moduleName: kmm_ci_a, firmwarePath: /firmware}
      kernelMappings:
        - $2
          containerImage: "$KMODD_REGISTRY/kmodd/pf:$3"
          registryTLS: {insecure: true}
YAML
}
module good "regexp: '^.+$'" good
module missing "regexp: '^.+$'" not-pushed
module other-kernel "literal: 6.1.0-0-other" good
module no-secret "regexp: '^.+$'" good pull-secret-that-is-not-there

step "the controller, as deployed"
POD_NAME=ctl "$bin/kmodd-controller" run --kubernetes --kubeconfig "$dir/controller.kubeconfig" \
  --namespace kmodd-system --listen 127.0.0.1:0 --cert-ip 127.0.0.1 --log-level debug 2>"$dir/ctl.log" &
pids+=($!)
eventually 20 grep -q '"controller running (Kubernetes)"' "$dir/ctl.log" || fail "the controller did not start"

step "a PreflightValidation for the VM's kernel: a verdict per Module"
k apply -f - >/dev/null <<YAML
apiVersion: kmm.sigs.x-k8s.io/v1beta2
kind: PreflightValidation
metadata: {name: to-next-kernel}
spec: {kernelVersion: $K, pushBuiltImage: false}
YAML
verdicts() { k get pfv to-next-kernel -o json >"$dir/pfv.json" && python3 - "$dir/pfv.json" <<'PY'
import json, sys
ms = json.load(open(sys.argv[1])).get("status", {}).get("modules", [])
sys.exit(0 if len(ms) == 4 and all(m["verificationStatus"] != "InProgress" for m in ms) else 1)
PY
}
eventually 60 verdicts || { cat "$dir/pfv.json"; fail "no verdict for every Module"; }
python3 - "$dir/pfv.json" "$K" <<'PY' || { cat "$dir/pfv.json"; fail "the verdicts are not the expected ones"; }
import json, sys
K = sys.argv[2]
got = {m["name"]: m for m in json.load(open(sys.argv[1]))["status"]["modules"]}
want = {
    "good": ("Success", "Done", f"Done: the image holds a driver for kernel {K}"),
    "missing": ("Failure", "Image", "Image: image 127.0.0.1:"),
    "other-kernel": ("Failure", "Image", f"Mapping: no kernelMapping matches kernel {K}"),
    "no-secret": ("Failure", "Image", "spec.imageRepoSecret kmm-demo/pull-secret-that-is-not-there"),
}
bad = []
for name, (status, stage, reason) in want.items():
    m = got[name]
    if m["namespace"] != "kmm-demo" or m["verificationStatus"] != status or m["verificationStage"] != stage \
            or reason not in m["statusReason"] or not m["lastTransitionTime"]:
        bad.append(f"{name}: {m}")
if "is not in its registry, and the Module has no build" not in got["missing"]["statusReason"]:
    bad.append(f"missing: {got['missing']['statusReason']}")
if bad:
    print("\n".join(bad)); sys.exit(1)
PY

step "the same from the command line: preflight --kubernetes, as the controller's account"
rc=0
"$bin/kmodd-controller" preflight --kubernetes --kubeconfig "$dir/controller.kubeconfig" --kernel "$K" -o json \
  >"$dir/cli.json" 2>"$dir/cli.log" || rc=$?
((rc == 1)) || { cat "$dir/cli.json"; fail "preflight --kubernetes exit $rc with failing Modules (want 1)"; }
python3 - "$dir/cli.json" <<'PY' || { cat "$dir/cli.json"; fail "preflight --kubernetes: not the controller's verdicts"; }
import json, sys
got = {m["name"]: m for m in json.load(open(sys.argv[1]))["modules"]}
assert sorted(got) == ["good", "missing", "no-secret", "other-kernel"], sorted(got)
assert got["good"]["verificationStatus"] == "Success" and got["good"]["verificationStage"] == "Done", got["good"]
assert got["other-kernel"]["verificationStage"] == "Mapping", got["other-kernel"]
assert "spec.imageRepoSecret kmm-demo/pull-secret-that-is-not-there" in got["no-secret"]["statusReason"], got["no-secret"]
PY
"$bin/kmodd-controller" preflight --kubernetes --modules /nowhere --kernel "$K" >"$dir/both.out" 2>&1 && fail "--kubernetes with --modules accepted"
grep -q "give --modules (Module manifests or directories) or --kubernetes, one of them" "$dir/both.out" \
  || { cat "$dir/both.out"; fail "--kubernetes with --modules: not the usage error"; }

step "an edited spec is checked again"
k patch pfv to-next-kernel --type merge -p '{"spec":{"kernelVersion":"6.1.0-0-other"}}' >/dev/null
rechecked() { k get pfv to-next-kernel -o json >"$dir/pfv2.json" && python3 - "$dir/pfv2.json" <<'PY'
import json, sys
got = {m["name"]: m for m in json.load(open(sys.argv[1])).get("status", {}).get("modules", [])}
sys.exit(0 if got.get("good", {}).get("verificationStatus") == "Failure" else 1)
PY
}
eventually 60 rechecked || { cat "$dir/pfv2.json"; fail "the edited spec was not checked again"; }
grep -q 'Content: the image has no /opt/lib/modules/6.1.0-0-other/' "$dir/pfv2.json" \
  || { cat "$dir/pfv2.json"; fail "good on the other kernel: not the content failure"; }
grep -q "\"statusReason\": \"Done: the image holds a driver for kernel 6.1.0-0-other\"" "$dir/pfv2.json" \
  && fail "other-kernel passed on a kernel its image was not built for"
[[ $(grep -c '"preflight done"' "$dir/ctl.log") == 2 ]] || fail "want two preflight runs in the log"
echo "# the edit re-checked every Module"

step "an object kmodd cannot act on is logged, not written"
k apply -f - >/dev/null <<YAML
apiVersion: kmm.sigs.x-k8s.io/v1beta2
kind: PreflightValidation
metadata: {name: two-parts}
spec: {kernelVersion: "6.1"}
YAML
eventually 20 grep -q 'PreflightValidation two-parts: spec.kernelVersion: \\"6.1\\" has fewer than three parts' "$dir/ctl.log" \
  || fail "the bad PreflightValidation is not logged naming its field"
[[ -z $(k get pfv two-parts -o jsonpath='{.status}') ]] || fail "a status was written for a PreflightValidation kmodd cannot act on"
step "sign --kubernetes: the key and certificate from the Module's Secrets (KMM's data.key, data.cert)"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$dir/key.pem" -out "$dir/cert.pem" -days 2 \
  -subj "/CN=kmodd cluster signing key" >/dev/null 2>&1 || fail "openssl req failed"
k -n kmm-demo create secret generic signing-key --from-file=key="$dir/key.pem" >/dev/null
k -n kmm-demo create secret generic signing-cert --from-file=cert="$dir/cert.pem" >/dev/null
k -n kmm-demo create secret generic wrong-cert --from-file=certificate="$dir/cert.pem" >/dev/null
signed_module() {  # signed_module NAME CERT_SECRET
  k apply -f - >/dev/null <<YAML
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: $1, namespace: kmm-demo}
spec:
  selector: {kmodd.io/preflight: "true"}
  moduleLoader:
    container:
      modprobe: {moduleName: kmm_ci_a}
      kernelMappings:
        - regexp: '^.+$'
          containerImage: "$KMODD_REGISTRY/kmodd/pf:$1-\${KERNEL_FULL_VERSION}"
          registryTLS: {insecure: true}
          sign:
            unsignedImage: "$KMODD_REGISTRY/kmodd/pf:good"
            unsignedImageRegistryTLS: {insecure: true}
            keySecret: {name: signing-key}
            certSecret: {name: $2}
            filesToSign: ["/opt/lib/modules/\${KERNEL_FULL_VERSION}/*.ko"]
YAML
}
signed_module signed signing-cert
signed_module badly-signed wrong-cert
rc=0
"$bin/kmodd-controller" sign --kubernetes --kubeconfig "$dir/controller.kubeconfig" --kernel "$K" -o json \
  >"$dir/sign.json" 2>"$dir/sign.log" || rc=$?
((rc == 1)) || { cat "$dir/sign.json" "$dir/sign.log"; fail "sign --kubernetes: exit $rc with one Module failing (want 1)"; }
python3 - "$dir/sign.json" <<'PY' || { cat "$dir/sign.json"; fail "sign --kubernetes: not the expected result"; }
import json, sys
got = {m["module"]: m for m in json.load(open(sys.argv[1]))["modules"]}
assert sorted(got) == ["kmm-demo/badly-signed", "kmm-demo/signed"], sorted(got)  # the others do not sign
s = got["kmm-demo/signed"]
assert s.get("signer") == "kmodd cluster signing key" and len(s["signedFiles"]) == 5, s
assert 'Secret kmm-demo/wrong-cert has no data["cert"]' in got["kmm-demo/badly-signed"]["error"], got["kmm-demo/badly-signed"]
PY
rc=0
"$bin/kmodd-controller" preflight --kubernetes --kubeconfig "$dir/controller.kubeconfig" --kernel "$K" -o json \
  >"$dir/cli2.json" 2>/dev/null || rc=$?
python3 - "$dir/cli2.json" <<'PY' || { cat "$dir/cli2.json"; fail "preflight of the signed Module"; }
import json, sys
got = {m["name"]: m for m in json.load(open(sys.argv[1]))["modules"]}
assert got["signed"]["verificationStatus"] == "Success", got["signed"]
assert "every module is signed" in got["signed"]["found"], got["signed"]
assert got["badly-signed"]["verificationStage"] == "Image", got["badly-signed"]  # never pushed
PY
echo "ok: kube preflight"

#!/usr/bin/env bash
# `kmodd-controller sign` against a real registry (Debian's docker-registry over HTTPS with
# basic auth, tools/registry/start basic): KMM's sign (unsignedImage -> containerImage) for
# the real test modules built for the VM's kernel, the two levels' sign merged as KMM merges
# them. The signed image is pulled back by the
# agent's own pull; its modules carry our signature (modinfo: signer, sig_hashalgo), which
# `openssl cms -verify` accepts against the certificate on the host and refuses once the
# module is altered. Preflight then passes the Module's signing check. Bad input: a key
# that is not the certificate's, a pattern that matches nothing, an unsignedImage that is
# not there, wrong credentials. Without the tools or the rig it FAILS, never skips.
#
# usage: sign_test.sh BIN_DIR REPO_ROOT
set -uo pipefail
bin="$1"
root="$2"
fail() { echo "FAIL: sign: $*"; exit 1; }
note() { echo "# $*"; }
show() { echo "--- $(basename "$1"):"; cat "$1" 2>/dev/null; echo "---"; }
# shellcheck source=tests/lib/harness.bash
. "$root/tests/lib/harness.bash"
declare tmp
make_temp_dir tmp kmodd-sign KMODD_SIGN_KEEP
require_tools /usr/bin/docker-registry umoci skopeo python3 openssl modinfo
require_bins "$bin" kmodd-controller kmodd-agent
for v in KMODD_VM_KERNEL KMODD_TEST_IMAGE KMODD_VM_MODULES_DIR; do
  [[ -n ${!v:-} ]] || fail "$v is not set: run tools/vm/setup and export what it prints (tools/test does)"
done
K=$KMODD_VM_KERNEL
P=opt/lib/modules/$K

registry_start "$tmp/reg" basic
"$root/tools/registry/push-image" "$KMODD_REGISTRY_DIR" kmodd/drv:unsigned --layer "$KMODD_TEST_IMAGE" \
  >"$tmp/push.out" 2>"$tmp/push.err" || { show "$tmp/push.err"; fail "push-image failed"; }
creds=(--ca "$KMODD_REGISTRY_CA" --docker-config "$KMODD_REGISTRY_AUTH_FILE")

openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tmp/key.pem" -out "$tmp/cert.pem" -days 2 \
  -subj "/CN=kmodd test signing key" >/dev/null 2>&1 || fail "openssl req failed"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tmp/other-key.pem" -out "$tmp/other-cert.pem" -days 2 \
  -subj "/CN=another key" >/dev/null 2>&1 || fail "openssl req failed"

mkdir -p "$tmp/modules"
module() {  # module FILE TAG UNSIGNED-TAG FILES-TO-SIGN
  cat >"$tmp/modules/$1.yaml" <<EOT
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: $1, namespace: sg}
spec:
  selector: {kmodd.io/sign: "true"}
  moduleLoader:
    container:
      modprobe: {moduleName: kmm_ci_a, firmwarePath: /firmware}
      kernelMappings:
        - regexp: '^.+\$'
          containerImage: "$KMODD_REGISTRY/kmodd/drv:$2-\${KERNEL_FULL_VERSION}"
          sign:
            unsignedImage: "$KMODD_REGISTRY/kmodd/drv:$3"
            keySecret: {name: signing-key}
            certSecret: {name: signing-cert}
            filesToSign: [$4]
EOT
}
module glob signed unsigned "'/$P/kmm_ci_*.ko'"
sign() { "$bin/kmodd-controller" sign --kernel "$K" --key "$tmp/key.pem" --cert "$tmp/cert.pem" "${creds[@]}" "$@"; }

# --- filesToSign as a glob, as KMM's signing job expands it ---------------------------------
sign --modules "$tmp/modules/glob.yaml" -o json >"$tmp/glob.json" 2>"$tmp/glob.err" \
  || { show "$tmp/glob.json"; show "$tmp/glob.err"; fail "sign with a filesToSign glob failed"; }
python3 - "$tmp/glob.json" "$K" <<'PY' || { show "$tmp/glob.json"; fail "the glob's result is not the expected one"; }
import json, sys
d = json.load(open(sys.argv[1])); K = sys.argv[2]
m = d["modules"][0]
want = [f"/opt/lib/modules/{K}/{n}.ko" for n in ("kmm_ci_a", "kmm_ci_dep_base", "kmm_ci_dep_user", "kmm_ci_fw")]
assert m["signer"] == "kmodd test signing key", m
assert m["signedFiles"] == want, m["signedFiles"]
assert m["image"].endswith(f"kmodd/drv:signed-{K}"), m["image"]
assert m["baseLayersMounted"] == 1, m  # same repository: the base layer is not sent again
assert m["digest"].startswith("sha256:")
# Only the signed modules' layer and the config went: far less than the image.
assert 0 < m["bytesPushed"] < m["bytesFetched"], (m["bytesPushed"], m["bytesFetched"])
print(f"# glob: {len(want)} modules signed, {m['bytesPushed']} bytes pushed, {m['bytesFetched']} fetched")
PY
digest1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["modules"][0]["digest"])' "$tmp/glob.json")
# Signing again pushes the same image (RSA signatures and the layer are deterministic).
sign --modules "$tmp/modules/glob.yaml" -o json >"$tmp/again.json" 2>&1 || { show "$tmp/again.json"; fail "second sign failed"; }
grep -q "\"digest\": \"$digest1\"" "$tmp/again.json" || { show "$tmp/again.json"; fail "signing twice gave another digest than $digest1"; }

# --- the signed image, pulled by the agent ----------------------------------------------------
"$bin/kmodd-agent" pull "$KMODD_REGISTRY/kmodd/drv:signed-$K" --kernel "$K" --firmware-path /firmware \
  --pull-secret "$KMODD_REGISTRY_AUTH_FILE" --ca "$KMODD_REGISTRY_CA" --cache "$tmp/cache" -o json >"$tmp/pull.json" 2>"$tmp/pull.err" \
  || { show "$tmp/pull.err"; fail "the agent could not pull the signed image"; }
ko=$(find "$tmp/cache" -path "*/$P/kmm_ci_a.ko" | head -1)
[[ -n $ko ]] || { find "$tmp/cache" | head -30; fail "no kmm_ci_a.ko in the pulled tree"; }
[[ $(modinfo -F signer "$ko") == "kmodd test signing key" ]] || { modinfo "$ko"; fail "modinfo signer of the signed module"; }
[[ $(modinfo -F sig_hashalgo "$ko") == sha256 ]] || { modinfo "$ko"; fail "modinfo sig_hashalgo"; }
[[ $(modinfo -F vermagic "$ko") == $(modinfo -F vermagic "$KMODD_TEST_IMAGE/$P/kmm_ci_a.ko") ]] || fail "vermagic changed by signing"
dummy=$(find "$tmp/cache" -path "*/$P/dummy.ko" | head -1)
[[ -z $(modinfo -F signer "$dummy") ]] || fail "dummy.ko is not in filesToSign and was signed anyway"
# The signature on the host: split module and CMS as the kernel does, verify, then alter.
split_sig() {  # split_sig KO OUTDIR: OUTDIR/body and OUTDIR/sig.der
  python3 - "$1" "$2" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
magic = b"~Module signature appended~\n"
assert data.endswith(magic), "no signature"
info = data[-len(magic) - 12:-len(magic)]
sig_len = struct.unpack(">I", info[8:12])[0]
end = len(data) - len(magic) - 12
open(sys.argv[2] + "/body", "wb").write(data[:end - sig_len])
open(sys.argv[2] + "/sig.der", "wb").write(data[end - sig_len:end])
PY
}
mkdir -p "$tmp/verify"
split_sig "$ko" "$tmp/verify" || fail "cannot split the signature off $ko"
cmp -s "$tmp/verify/body" "$KMODD_TEST_IMAGE/$P/kmm_ci_a.ko" || fail "the signed module's body is not the unsigned module"
openssl cms -verify -binary -inform DER -in "$tmp/verify/sig.der" -content "$tmp/verify/body" \
  -certfile "$tmp/cert.pem" -CAfile "$tmp/cert.pem" -purpose any -out /dev/null 2>"$tmp/verify.err" \
  || { show "$tmp/verify.err"; fail "openssl cms -verify refused the signature"; }
printf 'X' | dd of="$tmp/verify/body" bs=1 seek=1000 conv=notrunc 2>/dev/null
if openssl cms -verify -binary -inform DER -in "$tmp/verify/sig.der" -content "$tmp/verify/body" \
  -certfile "$tmp/cert.pem" -CAfile "$tmp/cert.pem" -purpose any -out /dev/null 2>/dev/null; then
  fail "openssl cms -verify accepted a module altered after signing"
fi
openssl cms -verify -binary -inform DER -in "$tmp/verify/sig.der" -content "$KMODD_TEST_IMAGE/$P/kmm_ci_a.ko" \
  -certfile "$tmp/other-cert.pem" -CAfile "$tmp/other-cert.pem" -purpose any -out /dev/null 2>/dev/null \
  && fail "openssl cms -verify accepted the signature against another certificate"

# --- every module (--all-modules), then preflight --------------------------------------------
module all all unsigned "'/$P/kmm_ci_a.ko'"
sign --modules "$tmp/modules/all.yaml" --all-modules >"$tmp/all.out" 2>&1 || { show "$tmp/all.out"; fail "sign --all-modules failed"; }
grep -q "sg/all: signed /$P/dummy.ko" "$tmp/all.out" || { show "$tmp/all.out"; fail "--all-modules did not sign dummy.ko"; }
"$bin/kmodd-controller" preflight --kernel "$K" --modules "$tmp/modules/all.yaml" "${creds[@]}" \
  --kernel-tree "$KMODD_VM_MODULES_DIR" >"$tmp/pf-all.out" 2>&1 || { show "$tmp/pf-all.out"; fail "preflight of the all-signed image failed"; }
grep -q "every module is signed" "$tmp/pf-all.out" || { show "$tmp/pf-all.out"; fail "preflight does not say every module is signed"; }
"$bin/kmodd-controller" preflight --kernel "$K" --modules "$tmp/modules/glob.yaml" "${creds[@]}" >"$tmp/pf-glob.out" 2>&1
rc=$?
((rc == 1)) && grep -q "/$P/dummy.ko is not signed" "$tmp/pf-glob.out" \
  || { show "$tmp/pf-glob.out"; fail "preflight of the glob-signed image does not name the unsigned dummy.ko (exit $rc)"; }

# --- both levels: KMM's merge (the mapping's unsignedImage, filesToSign appended) ------------
cat >"$tmp/modules/merged.yaml" <<EOT
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: merged, namespace: sg}
spec:
  selector: {kmodd.io/sign: "true"}
  moduleLoader:
    container:
      modprobe: {moduleName: kmm_ci_a}
      sign:
        unsignedImage: "$KMODD_REGISTRY/kmodd/drv:not-this-one"
        keySecret: {name: signing-key}
        certSecret: {name: signing-cert}
        filesToSign: [/$P/kmm_ci_a.ko]
      kernelMappings:
        - regexp: '^.+\$'
          containerImage: "$KMODD_REGISTRY/kmodd/drv:merged"
          sign:
            unsignedImage: "$KMODD_REGISTRY/kmodd/drv:unsigned"
            keySecret: {name: signing-key}
            certSecret: {name: signing-cert}
            filesToSign: [/$P/kmm_ci_fw.ko]
EOT
sign --modules "$tmp/modules/merged.yaml" >"$tmp/merged.out" 2>&1 || { show "$tmp/merged.out"; fail "sign of the two-level Module failed"; }
grep -q "sg/merged: signed /$P/kmm_ci_a.ko" "$tmp/merged.out" && grep -q "sg/merged: signed /$P/kmm_ci_fw.ko" "$tmp/merged.out" \
  && grep -q "signed from $KMODD_REGISTRY/kmodd/drv:unsigned" "$tmp/merged.out" \
  || { show "$tmp/merged.out"; fail "the two levels' sign were not merged as KMM merges them"; }
[[ $(grep -c "sg/merged: signed" "$tmp/merged.out") == 2 ]] || { show "$tmp/merged.out"; fail "merged: want two files signed"; }

# --- bad input: each a clear error, nothing pushed -------------------------------------------
bad() {  # bad NAME WORDS ARGS...: sign fails (exit 1) saying WORDS
  local name=$1 words=$2
  shift 2
  "$bin/kmodd-controller" sign --kernel "$K" "$@" >"$tmp/bad-$name.out" 2>&1
  local rc=$?
  ((rc == 1)) && grep -qF -- "$words" "$tmp/bad-$name.out" || { show "$tmp/bad-$name.out"; fail "$name: exit $rc, want 1 saying: $words"; }
}
bad key-mismatch "does not match the certificate's public key" --key "$tmp/other-key.pem" --cert "$tmp/cert.pem" "${creds[@]}" --modules "$tmp/modules/glob.yaml"
module nomatch nomatch unsigned "'/$P/nothing_*.ko'"
bad no-match "filesToSign[0] \"/$P/nothing_*.ko\" matches no file in unsignedImage" \
  --key "$tmp/key.pem" --cert "$tmp/cert.pem" "${creds[@]}" --modules "$tmp/modules/nomatch.yaml"
module missing missing not-there "'/$P/kmm_ci_a.ko'"
bad no-image "unsignedImage $KMODD_REGISTRY/kmodd/drv:not-there" \
  --key "$tmp/key.pem" --cert "$tmp/cert.pem" "${creds[@]}" --modules "$tmp/modules/missing.yaml"
python3 -c 'import base64,json,sys; print(json.dumps({"auths": {sys.argv[1]: {"auth": base64.b64encode(b"kmodd:wrong").decode()}}}))' \
  "$KMODD_REGISTRY" >"$tmp/wrong.json"
bad wrong-password "kmodd" --key "$tmp/key.pem" --cert "$tmp/cert.pem" --ca "$KMODD_REGISTRY_CA" \
  --docker-config "$tmp/wrong.json" --modules "$tmp/modules/glob.yaml"
grep -qiE "unauthori|denied|credential" "$tmp/bad-wrong-password.out" || { show "$tmp/bad-wrong-password.out"; fail "wrong password: the error does not say it is an auth problem"; }
curl -s -o /dev/null -w '%{http_code}' --cacert "$KMODD_REGISTRY_CA" -u "kmodd:$KMODD_REGISTRY_PASSWORD" \
  "$KMODD_REGISTRY_URL/v2/kmodd/drv/manifests/nomatch-$K" >"$tmp/code" || true
[[ $(cat "$tmp/code") == 404 ]] || fail "a failed sign left kmodd/drv:nomatch-$K in the registry (HTTP $(cat "$tmp/code"))"
note "sign: all cases as expected"

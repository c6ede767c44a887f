#!/usr/bin/env bash
# `kmodd-controller preflight` against a real registry (Debian's docker-registry,
# tools/registry/start) with images made from the real test modules built for the VM's
# kernel (tools/vm/setup): a good image passes to Done; each broken one fails at the stage
# that catches it, naming what it found (no directory for the kernel, another release's
# module, vermagic flags the kernel refuses, a dependency in neither the image nor the
# kernel, no firmware, unsigned modules with sign, an image that is not there with and
# without build, no mapping). Without the registry tools or the rig it FAILS, never skips.
#
# usage: preflight_test.sh BIN_DIR REPO_ROOT
set -uo pipefail
bin="$1"
root="$2"
fail() { echo "FAIL: preflight: $*"; exit 1; }
note() { echo "# $*"; }
show() { echo "--- $(basename "$1"):"; cat "$1" 2>/dev/null; echo "---"; }
# shellcheck source=tests/lib/harness.bash
. "$root/tests/lib/harness.bash"
declare tmp
make_temp_dir tmp kmodd-preflight KMODD_PREFLIGHT_KEEP
require_tools /usr/bin/docker-registry umoci skopeo python3
require_bins "$bin" kmodd-controller
for v in KMODD_VM_KERNEL KMODD_TEST_IMAGE KMODD_TEST_OTHERRELEASE_KO KMODD_TEST_BADVERMAGIC_KO KMODD_VM_MODULES_DIR; do
  [[ -n ${!v:-} ]] || fail "$v is not set: run tools/vm/setup and export what it prints (tools/test does)"
done
K=$KMODD_VM_KERNEL
P=opt/lib/modules/$K

registry_start "$tmp/reg" http
push() {  # push TAG DIR: an image of one layer made from DIR
  "$root/tools/registry/push-image" "$KMODD_REGISTRY_DIR" "kmodd/pf:$1" --layer "$2" \
    >"$tmp/push.out" 2>"$tmp/push.err" || { show "$tmp/push.err"; fail "push-image $1 failed"; }
}
variant() {  # variant NAME: a copy of the good image root in $tmp/img-NAME, printed
  rm -rf "$tmp/img-$1"
  cp -a "$KMODD_TEST_IMAGE" "$tmp/img-$1"
  echo "$tmp/img-$1"
}
push good "$KMODD_TEST_IMAGE"
d=$(variant other-kernel); mv "$d/opt/lib/modules/$K" "$d/opt/lib/modules/6.1.0-0-other"; push other-kernel "$d"
d=$(variant other-release); cp "$KMODD_TEST_OTHERRELEASE_KO" "$d/$P/kmm_ci_a.ko"; push other-release "$d"
d=$(variant bad-vermagic); cp "$KMODD_TEST_BADVERMAGIC_KO" "$d/$P/kmm_ci_a.ko"; push bad-vermagic "$d"
d=$(variant no-dep); rm "$d/$P/kmm_ci_dep_base.ko"; push no-dep "$d"
d=$(variant no-firmware); rm -r "$d/firmware"; push no-firmware "$d"

mkdir -p "$tmp/modules"
module() {  # module NAME TAG [EXTRA...]: a Module whose one mapping gives kmodd/pf:TAG
  local name=$1 tag=$2
  shift 2
  {
    cat <<EOT
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: $name, namespace: pf}
spec:
  selector: {kmodd.io/preflight: "true"}
  moduleLoader:
    container:
      modprobe:
        moduleName: kmm_ci_dep_user
        modulesLoadingOrder: [kmm_ci_dep_user, kmm_ci_dep_base]
        firmwarePath: /firmware
      kernelMappings:
        - regexp: '^.+$'
          containerImage: "$KMODD_REGISTRY/kmodd/pf:$tag"
          registryTLS: {insecure: true}
EOT
    for line in "$@"; do echo "$line"; done
  } >"$tmp/modules/$name.yaml"
}
module good good
module signed good \
  "          sign:" \
  "            unsignedImage: $KMODD_REGISTRY/kmodd/pf:good" \
  "            keySecret: {name: signing-key}" \
  "            certSecret: {name: signing-cert}" \
  "            filesToSign: [/$P/kmm_ci_dep_user.ko]"
module other-kernel other-kernel
module other-release other-release
module bad-vermagic bad-vermagic
module no-dep no-dep
module no-firmware no-firmware
module missing not-pushed
module missing-build not-pushed \
  "          build:" \
  "            dockerfileConfigMap: {name: dockerfile}"
sed "s/- regexp: '^.+\$'/- literal: 6.1.0-0-other/" "$tmp/modules/good.yaml" | sed 's/name: good/name: no-mapping/' \
  >"$tmp/modules/no-mapping.yaml"

"$bin/kmodd-controller" preflight --kernel "$K" --modules "$tmp/modules" \
  --kernel-tree "$KMODD_VM_MODULES_DIR" -o json >"$tmp/all.json" 2>"$tmp/all.err"
rc=$?
((rc == 1)) || { show "$tmp/all.json"; show "$tmp/all.err"; fail "exit $rc with failing Modules (want 1)"; }
python3 - "$tmp/all.json" "$K" <<'PY' || { show "$tmp/all.json"; fail "the verdicts above are not the expected ones"; }
import json, sys
doc = json.load(open(sys.argv[1]))
K = sys.argv[2]
P = f"/opt/lib/modules/{K}/"
want = {  # name: (status, stage, words the reason must hold)
    "good": ("Success", "Done", [f"the image holds a driver for kernel {K}"]),
    "signed": ("Failure", "Content", [f"{P}kmm_ci_a.ko is not signed, and the Module signs"]),
    "other-kernel": ("Failure", "Content", [f"the image has no {P} (it has /opt/lib/modules/ for 6.1.0-0-other)"]),
    "other-release": ("Failure", "Content", [f"{P}kmm_ci_a.ko: its vermagic", "is for kernel 9.9.9-99-cloud-amd99, not " + K]),
    "bad-vermagic": ("Failure", "Content", [f"{P}kmm_ci_a.ko: its vermagic", "kmmcibroken", "differs from kernel", "the kernel refuses to load it"]),
    "no-dep": ("Failure", "Content", ["kmm_ci_dep_user depends on kmm_ci_dep_base, which neither the image nor kernel",
                                      "modulesLoadingOrder module kmm_ci_dep_base is not in"]),
    "no-firmware": ("Failure", "Content", ["firmwarePath /firmware is not in the image"]),
    "missing": ("Failure", "Image", ["kmodd/pf:not-pushed is not in its registry, and the Module has no build to make it"]),
    "missing-build": ("Failure", "Image", ["is not in its registry; the Module has build, which this kmodd does not run"]),
    "no-mapping": ("Failure", "Mapping", [f"no kernelMapping matches kernel {K}"]),
}
got = {m["name"]: m for m in doc["modules"]}
assert doc["kernelVersion"] == K, doc["kernelVersion"]
assert set(got) == set(want), sorted(got)
bad = []
for name, (status, stage, words) in want.items():
    m = got[name]
    if m["verificationStatus"] != status or m["verificationStage"] != stage or not all(w in m["statusReason"] for w in words):
        bad.append(f"{name}: {m['verificationStatus']} {m['verificationStage']}: {m['statusReason']}")
good = got["good"]
# Every layer fetched once, and only that: the image's bytes.
if not (good["bytesFetched"] == good["imageBytes"] > 0 and good["digest"].startswith("sha256:")):
    bad.append(f"good: fetched {good.get('bytesFetched')} of {good.get('imageBytes')} bytes")
found = "\n".join(good.get("found", []))
for w in ["5 modules in " + P, "dummy, kmm_ci_a, kmm_ci_dep_base, kmm_ci_dep_user, kmm_ci_fw", "firmwarePath /firmware is there"]:
    if w not in found:
        bad.append(f"good: found does not say {w!r}: {found}")
if bad:
    print("\n".join(bad))
    sys.exit(1)
print(f"# {len(want)} Modules: verdicts as expected; good fetched {good['bytesFetched']} bytes")
PY
grep -q "pf/good: fetched" "$tmp/all.err" || { show "$tmp/all.err"; fail "no download progress on stderr"; }

# The good Module alone: exit 0, a table.
"$bin/kmodd-controller" preflight --kernel "$K" --modules "$tmp/modules/good.yaml" >"$tmp/good.out" 2>"$tmp/good.err" \
  || { show "$tmp/good.out"; show "$tmp/good.err"; fail "the good Module alone did not pass"; }
grep -qE "^pf/good +Success +Done +$KMODD_REGISTRY/kmodd/pf:good +the image holds a driver" "$tmp/good.out" \
  || { show "$tmp/good.out"; fail "the table does not show pf/good Success Done"; }
# Without --kernel-tree (and no /lib/modules/K here), kernel dependencies are noted unchecked.
if [[ ! -e /lib/modules/$K/modules.dep ]]; then
  "$bin/kmodd-controller" preflight --kernel "$K" --modules "$tmp/modules/no-dep.yaml" -o yaml >"$tmp/nodep.out" 2>&1
  grep -q "modulesLoadingOrder module kmm_ci_dep_base is not in" "$tmp/nodep.out" \
    || { show "$tmp/nodep.out"; fail "no-dep without a kernel tree"; }
  grep -q "kmm_ci_dep_base (not checked: no module tree of the kernel was given)" "$tmp/nodep.out" \
    || { show "$tmp/nodep.out"; fail "no-dep without a kernel tree does not say the dependency went unchecked"; }
fi

# Bad input: clear errors, exit codes.
"$bin/kmodd-controller" preflight --modules "$tmp/modules" >"$tmp/usage.out" 2>&1
rc=$?
((rc == 2)) && grep -q -- "--kernel" "$tmp/usage.out" || { show "$tmp/usage.out"; fail "no --kernel: exit $rc"; }
"$bin/kmodd-controller" preflight --kernel "$K" --modules "$tmp/modules" --kernel-tree "$tmp/nowhere" >"$tmp/tree.out" 2>&1
rc=$?
((rc == 1)) && grep -q "$tmp/nowhere/modules.dep cannot be read" "$tmp/tree.out" || { show "$tmp/tree.out"; fail "bad --kernel-tree: exit $rc"; }
echo '{"auths": {"x": {"auth": 5}}}' >"$tmp/bad-config.json"
"$bin/kmodd-controller" preflight --kernel "$K" --modules "$tmp/modules/good.yaml" --docker-config "$tmp/bad-config.json" -o json >"$tmp/cfg.out" 2>&1
rc=$?
((rc == 1)) && grep -q -- "--docker-config" "$tmp/cfg.out" || { show "$tmp/cfg.out"; fail "bad --docker-config: exit $rc"; }
"$bin/kmodd-controller" preflight --kernel "$K" --modules "$tmp/empty-dir-that-is-not-there" >"$tmp/mods.out" 2>&1
rc=$?
((rc == 1)) || { show "$tmp/mods.out"; fail "a missing --modules path: exit $rc"; }
note "preflight: all cases as expected"

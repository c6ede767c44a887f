#!/usr/bin/env bash
# `kmodd-controller build` (KMM's build with buildah) against a real registry: a Dockerfile
# in a ConfigMap beside the Module builds tools/test-modules against the VM kernel's
# linux-headers (the host's toolchain and headers bind-mounted with --volume, under a base
# image of nothing but the merged-/usr links), with $KERNEL_FULL_VERSION and the Module's
# buildArgs; the image is pushed, preflight finds the modules for that kernel in it, the same
# inputs do not build again and a changed argument or imageRebuildTriggerGeneration does;
# with sign and a key, the built image is signed in place. A Dockerfile that fails is retried
# and reported with buildah's log; a missing ConfigMap is named. Without buildah, the registry
# tools or the rig it FAILS, never skips.
#
# usage: build_test.sh BIN_DIR REPO_ROOT
set -uo pipefail
bin="$1"
root="$2"
fail() { echo "FAIL: build: $*"; exit 1; }
note() { echo "# $*"; }
show() { echo "--- $(basename "$1"):"; cat "$1" 2>/dev/null; echo "---"; }
# shellcheck source=tests/lib/harness.bash
. "$root/tests/lib/harness.bash"
declare tmp
make_temp_dir tmp kmodd-build KMODD_BUILD_KEEP
require_tools /usr/bin/docker-registry umoci skopeo buildah python3 openssl modinfo
require_bins "$bin" kmodd-controller
for v in KMODD_VM_KERNEL KMODD_VM_HEADERS KMODD_VM_MODULES_DIR; do
  [[ -n ${!v:-} ]] || fail "$v is not set: run tools/vm/setup and export what it prints (tools/test does)"
done
[[ -d $KMODD_VM_HEADERS ]] || fail "no kernel headers at $KMODD_VM_HEADERS"
K=$KMODD_VM_KERNEL

registry_start "$tmp/reg" http
# The base: the links of a merged-/usr Debian and nothing else; the build gets /usr itself
# (gcc, make, kbuild, the headers) from the host, read-only.
mkdir -p "$tmp/base/etc" "$tmp/base/tmp" "$tmp/base/usr"
for l in bin lib lib64 sbin; do ln -s "usr/$l" "$tmp/base/$l"; done
echo 'root:x:0:0:root:/root:/bin/sh' >"$tmp/base/etc/passwd"
"$root/tools/registry/push-image" "$KMODD_REGISTRY_DIR" kmodd/build-base:v1 --layer "$tmp/base" >/dev/null 2>"$tmp/push.err" \
  || { show "$tmp/push.err"; fail "push-image of the base failed"; }
src_tgz=$(tar czf - -C "$root/tools/test-modules" Kbuild dummy.c kmm_ci_a.c kmm_ci_dep_base.c kmm_ci_dep_user.c kmm_ci_fw.c | base64 -w0)

mkdir -p "$tmp/modules"
# module NAME RUN-LINE [EXTRA-ARG-VALUE] [TRIGGER]: a Module whose build's Dockerfile ends in RUN-LINE
module() {
  cat >"$tmp/modules/$1.yaml" <<EOT
apiVersion: v1
kind: ConfigMap
metadata: {name: $1-dockerfile, namespace: bd}
data:
  dockerfile: |
    FROM $KMODD_REGISTRY/kmodd/build-base:v1
    ARG KERNEL_FULL_VERSION
    ARG SRC_TGZ
    ARG EXTRA
    $2
---
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: $1, namespace: bd}
spec:
  selector: {kmodd.io/build: "true"}
  ${4:+imageRebuildTriggerGeneration: $4}
  moduleLoader:
    container:
      modprobe: {moduleName: kmm_ci_a}
      kernelMappings:
        - regexp: '^.+\$'
          containerImage: "$KMODD_REGISTRY/kmodd/built:$1-\${KERNEL_FULL_VERSION}"
          registryTLS: {insecure: true}
          build:
            dockerfileConfigMap: {name: $1-dockerfile}
            baseImageRegistryTLS: {insecure: true}
            buildArgs:
              - {name: SRC_TGZ, value: "$src_tgz"}
              - {name: EXTRA, value: "${3:-one}"}
EOT
}
good_run='RUN mkdir -p /src && echo "$SRC_TGZ" | base64 -d | tar xz -C /src && make -s -C /usr/src/linux-headers-$KERNEL_FULL_VERSION M=/src modules && mkdir -p /opt/lib/modules/$KERNEL_FULL_VERSION && cp /src/*.ko /opt/lib/modules/$KERNEL_FULL_VERSION/'
module good "$good_run"
build() { "$bin/kmodd-controller" build --kernel "$K" --volume /usr:/usr:ro --volume /etc/alternatives:/etc/alternatives:ro --work "$tmp" "$@"; }
json_field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["modules"][0].get(sys.argv[2]))' "$1" "$2"; }

# --- the build, then preflight of what it pushed -----------------------------------------------
build --modules "$tmp/modules/good.yaml" -o json >"$tmp/good.json" 2>"$tmp/good.err" \
  || { show "$tmp/good.json"; show "$tmp/good.err"; fail "the build of the test modules failed"; }
[[ $(json_field "$tmp/good.json" built) == True ]] || { show "$tmp/good.json"; fail "not built"; }
digest1=$(json_field "$tmp/good.json" digest)
[[ $digest1 == sha256:* ]] || { show "$tmp/good.json"; fail "no digest"; }
"$bin/kmodd-controller" preflight --kernel "$K" --modules "$tmp/modules/good.yaml" --kernel-tree "$KMODD_VM_MODULES_DIR" \
  >"$tmp/pf.out" 2>&1 || { show "$tmp/pf.out"; fail "preflight of the built image failed"; }
grep -q "bd/good: 5 modules in /opt/lib/modules/$K/: dummy, kmm_ci_a, kmm_ci_dep_base, kmm_ci_dep_user, kmm_ci_fw" "$tmp/pf.out" \
  || { show "$tmp/pf.out"; fail "preflight does not find the five modules built for $K"; }
ls "$tmp" | grep -q '^kmodd-build\.' && fail "the private build directory was left behind"

# --- the same inputs: not built again; a changed argument or trigger: built again --------------
build --modules "$tmp/modules/good.yaml" -o json >"$tmp/again.json" 2>&1 || { show "$tmp/again.json"; fail "second run failed"; }
[[ $(json_field "$tmp/again.json" built) == False ]] || { show "$tmp/again.json"; fail "built again from the same inputs"; }
module good "$good_run" two
build --modules "$tmp/modules/good.yaml" -o json >"$tmp/arg.json" 2>&1 || { show "$tmp/arg.json"; fail "build with a changed argument failed"; }
[[ $(json_field "$tmp/arg.json" built) == True ]] || { show "$tmp/arg.json"; fail "a changed build argument did not build again"; }
module good "$good_run" two 5
build --modules "$tmp/modules/good.yaml" -o json >"$tmp/trigger.json" 2>&1 || { show "$tmp/trigger.json"; fail "build with a trigger failed"; }
[[ $(json_field "$tmp/trigger.json" built) == True ]] || { show "$tmp/trigger.json"; fail "imageRebuildTriggerGeneration did not build again"; }

# --- build, then sign in place ------------------------------------------------------------------
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tmp/key.pem" -out "$tmp/cert.pem" -days 2 \
  -subj "/CN=kmodd build signing key" >/dev/null 2>&1 || fail "openssl req failed"
module signed "$good_run"
cat >>"$tmp/modules/signed.yaml" <<EOT
          sign:
            keySecret: {name: k}
            certSecret: {name: c}
            filesToSign: ["/opt/lib/modules/\${KERNEL_FULL_VERSION}/*.ko"]
EOT
build --modules "$tmp/modules/signed.yaml" --key "$tmp/key.pem" --cert "$tmp/cert.pem" >"$tmp/signed.out" 2>&1 \
  || { show "$tmp/signed.out"; fail "build and sign failed"; }
grep -q "5 modules signed" "$tmp/signed.out" || { show "$tmp/signed.out"; fail "the built image was not signed"; }
"$bin/kmodd-controller" preflight --kernel "$K" --modules "$tmp/modules/signed.yaml" >"$tmp/pf-signed.out" 2>&1 \
  || { show "$tmp/pf-signed.out"; fail "preflight of the built and signed image failed"; }
grep -q "every module is signed" "$tmp/pf-signed.out" || { show "$tmp/pf-signed.out"; fail "preflight: not every module signed"; }

# --- failures: retried and reported, named ------------------------------------------------------
module broken 'RUN echo "kmodd test: this build fails on purpose" && false'
rc=0
build --modules "$tmp/modules/broken.yaml" --attempts 2 >"$tmp/broken.out" 2>&1 || rc=$?
((rc == 1)) || { show "$tmp/broken.out"; fail "a failing Dockerfile: exit $rc (want 1)"; }
grep -q "failed 2 times; buildah's log ends:" "$tmp/broken.out" && grep -q "this build fails on purpose" "$tmp/broken.out" \
  || { show "$tmp/broken.out"; fail "the failing build is not reported with its attempts and log"; }
module nocm "RUN true"
python3 - "$tmp/modules/nocm.yaml" <<'PY'
import sys
p = sys.argv[1]
docs = open(p).read().split("---\n")
open(p, "w").write(docs[1])  # the Module without its ConfigMap
PY
rc=0
build --modules "$tmp/modules/nocm.yaml" >"$tmp/nocm.out" 2>&1 || rc=$?
((rc == 1)) && grep -q "build.dockerfileConfigMap bd/nocm-dockerfile: no such ConfigMap in --modules" "$tmp/nocm.out" \
  || { show "$tmp/nocm.out"; fail "a missing ConfigMap: exit $rc, not named"; }
note "build: all cases as expected"

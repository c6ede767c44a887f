# shellcheck shell=bash
# The qemu real-kernel rig (tools/vm/setup, tools/vm/run) as the tests that boot it use it.
# Sourced after the caller's fail (see harness.bash).

# vm_rig_require: the rig's variables (KMODD_TEST_IMAGE, KMODD_VM_KERNEL, ...): tools/test
# exports them; alone, the cache's env file has them. Fails when the rig is not set up.
vm_rig_require() {
  local cache=${KMODD_VM_CACHE:-/var/cache/kmodd-vm}
  if [[ -z ${KMODD_TEST_IMAGE:-} && -f $cache/env ]]; then
    # shellcheck source=/dev/null
    . "$cache/env"
  fi
  [[ -d ${KMODD_TEST_IMAGE:-/nonexistent} ]] \
    || fail "the real-kernel rig is not set up ($cache/env, KMODD_TEST_IMAGE): run" \
            "eval \"\$(tools/vm/setup)\" as root (tools/test does)"
}

# vm_strip_bins BIN_DIR OUT_DIR NAME...: each binary without debug info in OUT_DIR. The
# guest's root is a RAM disk holding the kernel's whole module tree, and a RelWithDebInfo
# kmodd-agent (100 MB) no longer fits beside it.
vm_strip_bins() {
  local from=$1 to=$2 b
  shift 2
  mkdir -p "$to"
  for b in "$@"; do
    [[ -x $from/$b ]] || fail "$from/$b is missing: build first"
    strip --strip-debug -o "$to/$b" "$from/$b" || fail "cannot strip $from/$b"
  done
}

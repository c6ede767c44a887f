# Helpers of tests/e2e/e2e_test.sh (sourced; it sets bin, root, case_name, tmp, g): the
# rig check, the guest's script and its output, boots, assertions, NodeModulesConfigs.
# shellcheck shell=bash
# shellcheck disable=SC2154  # bin, root, case_name, tmp and g come from e2e_test.sh

fail() { echo "FAIL: $case_name: $*"; exit 1; }
note() { echo "# $*"; }
show() {  # show FILE: its content (the last 60 lines of a long one, e.g. the kernel log)
  local n
  n=$(wc -l 2>/dev/null <"$1" || echo 0)
  if ((n > 60)); then echo "--- $(basename "$1") (last 60 of $n lines):"; tail -n 60 "$1"
  else echo "--- $(basename "$1"):"; cat "$1" 2>/dev/null; fi
  echo "---"
}

# shellcheck source=tests/lib/vm.bash
. "$root/tests/lib/vm.bash"
vm_rig_require
# The cases also boot the image without dependencies and insert a module of the wrong vermagic.
cache=${KMODD_VM_CACHE:-/var/cache/kmodd-vm}
[[ -f $cache/env && -d ${KMODD_TEST_IMAGE_NODEP:-/nonexistent} && -f ${KMODD_TEST_BADVERMAGIC_KO:-/nonexistent} ]] \
  || fail "the real-kernel rig is not set up ($cache/env, KMODD_TEST_IMAGE_NODEP): run" \
          "eval \"\$(tools/vm/setup)\" as root (tools/test does)"
vm_strip_bins "$bin" "$tmp/bin" kmodd-agent kmodd-timeit
K=$KMODD_VM_KERNEL

# --- assertions on the guest's sections (and $tmp/dmesg) ----------------------------
sec() { echo "$g/$1"; }
expect_rc() {  # expect_rc STEP WANT: the exit status apply (or run) recorded for STEP
  local got
  got=$(cat "$(sec "$1.rc")" 2>/dev/null)
  [[ $got == "$2" ]] || { show "$(sec "$1.out")"; show "$(sec "$1.err")"; fail "$1: exit ${got:-?}, want $2"; }
}
expect_nonzero() {  # expect_nonzero STEP
  local got
  got=$(cat "$(sec "$1.rc")" 2>/dev/null)
  [[ -n $got && $got != 0 ]] || { show "$(sec "$1.out")"; show "$(sec "$1.err")"; fail "$1: exit ${got:-?}, want non-zero"; }
}
expect_in() {  # expect_in FILE TEXT
  grep -qF -- "$2" "$1" 2>/dev/null || { show "$1"; fail "missing in $(basename "$1"): $2"; }
}
expect_not_in() {  # expect_not_in FILE TEXT
  ! grep -qF -- "$2" "$1" 2>/dev/null || { show "$1"; fail "unexpected in $(basename "$1"): $2"; }
}
expect_count() {  # expect_count FILE TEXT N
  local n
  n=$(grep -cF -- "$2" "$1" 2>/dev/null)
  [[ $n == "$3" ]] || { show "$1"; fail "$(basename "$1"): \"$2\" $n time(s), want $3"; }
}
expect_before() {  # expect_before FILE FIRST SECOND: FIRST's first line comes before SECOND's
  local a b
  a=$(grep -nF -- "$2" "$1" | head -n1 | cut -d: -f1)
  b=$(grep -nF -- "$3" "$1" | head -n1 | cut -d: -f1)
  [[ -n $a && -n $b && $a -lt $b ]] || { show "$1"; fail "$(basename "$1"): want \"$2\" before \"$3\""; }
}
loaded() { grep -q "^$2 " "$(sec "$1.modules")"; }
expect_loaded() {  # expect_loaded SNAPSHOT MODULE...
  local s=$1; shift
  for m in "$@"; do loaded "$s" "$m" || { show "$(sec "$s.modules")"; fail "$s: $m is not loaded"; }; done
}
expect_not_loaded() {  # expect_not_loaded SNAPSHOT MODULE...
  local s=$1; shift
  for m in "$@"; do ! loaded "$s" "$m" || { show "$(sec "$s.modules")"; fail "$s: $m is loaded"; }; done
}
field() {  # field STEP KEY: a top-level "key: value" of apply's YAML output
  sed -n "s/^$2: //p" "$(sec "$1.out")" | head -n1
}

# --- the guest --------------------------------------------------------------------------
# Guest helpers (busybox sh). Everything goes to stdout as sections ("@@@ NAME" then its
# lines) that the host splits into $g/NAME.
cat >"$tmp/guest/lib.sh" <<'EOF'
K=$(uname -r)
A=/usr/bin/kmodd-agent
T=/usr/bin/kmodd-timeit
M=/img/opt/lib/modules/$K
sec() { echo "@@@ $1"; }
put() { sec "$1"; [ -f "$2" ] && awk 1 "$2"; }   # awk 1: a missing final newline added
# run STEP CMD...: stdout, stderr and exit status of CMD as STEP.out, STEP.err, STEP.rc
run() {
  step=$1; shift
  "$@" >/tmp/step.out 2>/tmp/step.err
  rc=$?
  put "$step.out" /tmp/step.out; put "$step.err" /tmp/step.err; sec "$step.rc"; echo $rc
}
apply() { step=$1; f=$2; shift 2; run "$step" $A apply -f "/e2e/$f" "$@"; }
snap() { put "$1.modules" /proc/modules; }
EOF

guest() {  # guest <<'EOF' ... EOF: the case's script, after lib.sh
  { echo ". /e2e/lib.sh"; cat; echo "exit 0"; } >"$tmp/guest/case.sh"
}

boot() {  # boot [tools/vm/run options]: runs the guest script, splits its sections
  local rc=0 n
  rm -rf "$g" && mkdir -p "$g"
  n=$((${n_boot:-0} + 1)); n_boot=$n
  "$root/tools/vm/run" --timeout 90 \
    --bin "$tmp/bin/kmodd-agent:/usr/bin/kmodd-agent" --bin "$tmp/bin/kmodd-timeit:/usr/bin/kmodd-timeit" \
    --tree "$tmp/guest:/e2e" --tree "$KMODD_TEST_IMAGE:/img" --tree "$KMODD_TEST_IMAGE_NODEP:/img-nodep" \
    --tree "$tmp/trees:/trees" --dmesg "$tmp/dmesg" "$@" -- sh /e2e/case.sh \
    >"$tmp/guest.out" 2>"$tmp/guest.err" || rc=$?
  if ((rc != 0)); then
    cat "$tmp/guest.err"
    fail "boot $n: the guest failed (tools/vm/run exit $rc)"
  fi
  awk -v d="$g" '/^@@@ /{ f = d "/" $2; printf "" > f; next } f { print > f }' "$tmp/guest.out"
  cp "$tmp/dmesg" "$g/dmesg"
}

# NodeModulesConfig with the given module entries (YAML list items, 4-space indented).
config() {  # config FILE <<EOF ... EOF
  {
    cat <<EOF
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: NodeModulesConfig
metadata:
  name: kmodd-vm
spec:
EOF
    local body
    body=$(cat)
    if [[ -z $body ]]; then echo "  modules: []"; else echo "  modules:"; echo "$body"; fi
  } >"$tmp/guest/$1"
}

# One Module entry: module NAME IMAGE MODULE_NAME [EXTRA]; EXTRA is YAML under config:
# (inTreeModulesToRemove, or modprobe keys prefixed "modprobe.").
module() {
  local name=$1 image=$2 mod=$3 extra=${4:-}
  cat <<EOF
    - name: $name
      namespace: e2e
      config:
        kernelVersion: $K
        containerImage: dir:$image
EOF
  grep '^inTree' <<<"$extra" | sed 's/^/        /'
  echo "        modprobe:"
  echo "          moduleName: $mod"
  echo "          dirName: /opt"
  grep '^modprobe\.' <<<"$extra" | sed 's/^modprobe\./          /'
}

config empty.yaml </dev/null

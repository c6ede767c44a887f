#!/usr/bin/env bash
# The whole job on one machine, end to end: a local registry holding the example driver
# image (built from tools/test-modules), kmodd-controller in standalone mode on a directory
# of Modules, and kmodd-agent inside the qemu real-kernel VM, connected over mTLS.
#
# usage: system_test.sh BIN_DIR REPO_ROOT [--demo | --bench N]
#
# The full run (a ctest test, label e2e) proves, against the real kernel:
#   1. the Module is Loaded on the node (controller status, agentctl status, /proc/modules,
#      the firmware the module asked for);
#   2. change the Module's image: the node reloads it from the new image;
#   2b. readiness (issue 15): a ModulePolicy with checks of every kind the node can pass
#      (sysfs content, a value stable for a soak, a device node through udev, no kernel log
#      line matching): Ready on v2; then v1 with a check of an attribute kmm_ci_fw never
#      has (a parameter fw_mode): Failed with that reason, rolled back by itself to
#      v2 (the entry it ran well, with the checks it passed), Loaded there again;
#   3. delete the Module: it is unloaded and its firmware removed;
#   4. stop the controller (kill -9): the node keeps its module;
#   5. reboot the VM with neither controller nor registry running: the module is back,
#      from the agent's journal and image cache.
# --demo stops after step 1 and prints what a person would look at (tools/demo).
# --bench N (tools/bench/module_to_loaded) times, N times, a Module file written to "Loaded"
# at the controller with the image cached, beside the kernel's own load time.
#
# The host drives; the guest follows, stepped by the director (tests/lib/system.bash).
set -uo pipefail
bin="$1"
root="$2"
demo=0
bench=0
[[ ${3:-} == --demo ]] && demo=1
[[ ${3:-} == --bench ]] && bench=${4:?--bench needs a count}
case_name=system
fail() { echo "FAIL: $case_name: $*"; exit 1; }
note() { echo "# $*"; }
show() { echo "--- $(basename "$1"):"; tail -n 60 "$1" 2>/dev/null; echo "---"; }
say() { ((demo)) && echo "$*"; return 0; }
# shellcheck source=tests/lib/harness.bash
. "$root/tests/lib/harness.bash"
# shellcheck source=tests/lib/vm.bash
. "$root/tests/lib/vm.bash"
# shellcheck source=tests/lib/system.bash
. "$root/tests/lib/system.bash"
declare tmp
make_temp_dir tmp kmodd-system KMODD_E2E_KEEP

# --- the rig ----------------------------------------------------------------------------
vm_rig_require
K=$KMODD_VM_KERNEL
require_tools docker-registry skopeo umoci python3 openssl
vm_strip_bins "$bin" "$tmp/bin" kmodd-agent agentctl
require_bins "$bin" kmodd-controller

# --- registry and images ----------------------------------------------------------------
registry_start "$tmp/reg"
reg_port=${KMODD_REGISTRY##*:}
# v1: the test modules and firmware in KMM layout; v2: the same driver, another image.
push_demo_images "$tmp/reg"
# shellcheck disable=SC2154  # set by push_demo_images
note "images: v1 $digest_v1, v2 $digest_v2"

# --- certificates, Modules, controller --------------------------------------------------
"$root/tools/pki/make-dev-certs" "$tmp/pki" --node kmodd-vm >"$tmp/pki.out" 2>&1 || { show "$tmp/pki.out"; fail "make-dev-certs failed"; }
mkdir -p "$tmp/guest/pki"
cp "$tmp/pki/ca.pem" "$tmp/pki/node-kmodd-vm.pem" "$tmp/pki/node-kmodd-vm.key" "$tmp/guest/pki/"
mkdir -p "$tmp/modules"
module_file() {  # module_file TAG [POLICY_FILE]: write the demo Module pointing at image TAG
  # (and a ModulePolicy, in the same file so that both change at once)
  sed -e "s|@REGISTRY@|10.0.2.2:$reg_port|" -e "s|@TAG@|$1|" "$root/examples/demo/kmm-ci.yaml" \
    >"$tmp/kmm-ci.yaml.new" || return 1
  [[ -z ${2:-} ]] || { echo "---"; cat "$2"; } >>"$tmp/kmm-ci.yaml.new"
  mv "$tmp/kmm-ci.yaml.new" "$tmp/modules/kmm-ci.yaml"
}
module_file v1
ctl_port=$(free_port)
start_controller() {
  local debug=()
  ((bench)) && debug=(--log-level debug)
  "$bin/kmodd-controller" run --modules-dir "$tmp/modules" --listen "127.0.0.1:$ctl_port" \
    --cert "$tmp/pki/controller.pem" --key "$tmp/pki/controller.key" --ca "$tmp/pki/ca.pem" \
    --status-file "$tmp/status.yaml" "${debug[@]}" >>"$tmp/controller.log" 2>&1 &
  controller_pid=$!
  pids+=("$controller_pid")
}
start_controller

# --- the director: the step the guest should take next ----------------------------------
director_start "$tmp/director"

# Module status as the controller reports it: "PHASE DIGEST" for the node, or "absent".
node_status() {
  "$bin/kmodd-controller" status --status-file "$tmp/status.yaml" -o json 2>/dev/null | python3 -c '
import json, sys
try:
    doc = json.load(sys.stdin)
except ValueError:
    print("unreadable"); sys.exit()
for m in doc.get("modules", []):
    if m.get("namespace") == "kmm-demo" and m.get("name") == "kmm-ci":
        for n in (m.get("status") or {}).get("nodes") or []:
            if n.get("node") == "kmodd-vm":
                print(n.get("phase", ""), n.get("imageDigest", "")); sys.exit()
print("absent")'
}
node_status_is() { [[ $(node_status) == "$1"* ]]; }  # node_status_is WANT (a prefix)
wait_status() {  # wait_status WANT SECONDS: until node_status prints WANT (a prefix)
  eventually "$2" node_status_is "$1" && return 0
  show "$tmp/controller.log"
  show "$tmp/status.yaml"
  fail "controller status for kmodd-vm is \"$(node_status)\" after $2 s, want \"$1\""
}

# --- the guest ---------------------------------------------------------------------------
cat >"$tmp/guest/agent.sh" <<EOF
mkdir -p /var/lib/kmodd
/usr/bin/kmodd-agent run --node-name kmodd-vm --controller 10.0.2.2:$ctl_port \\
  --cert /etc/kmodd/node-kmodd-vm.pem --key /etc/kmodd/node-kmodd-vm.key --ca /etc/kmodd/ca.pem \\
  --state-dir /var/lib/kmodd --firmware-dir /var/lib/kmodd/firmware --firmware-class-path \\
  --label kmodd.io/demo=true \\
  --metrics 127.0.0.1:9464 >>/var/lib/kmodd/agent.log 2>&1 &
echo \$! >/run/agent.pid
EOF
director_guest_lib "$tmp/guest/lib.sh"
cat >>"$tmp/guest/lib.sh" <<'EOF'
loaded() { grep -q "^kmm_ci_fw " /proc/modules; }
wait_unloaded() {
  i=0
  while loaded; do i=$((i + 1)); [ $i -lt 300 ] || return 1; usleep 100000; done
}
wait_loaded() {
  i=0
  while ! loaded; do i=$((i + 1)); [ $i -lt "${1:-600}" ] || return 1; usleep 100000; done
}
EOF
cat >"$tmp/guest/boot1.sh" <<'EOF'
. /kmodd-test/lib.sh
sh /kmodd-test/agent.sh
wait_step loaded || exit 1
section loaded.status; agentctl status
section loaded.modules; grep "^kmm_ci_fw " /proc/modules
section loaded.firmware; find /var/lib/kmodd/firmware -path '*kmm_ci_fw/fw.bin'
section loaded.fwpath; cat /sys/module/firmware_class/parameters/path
ack loaded
[ -f /kmodd-test/demo ] && { stop_agent; exit 0; }
[ -f /kmodd-test/bench ] && { wait_step done; stop_agent; section boot1.log; cat /var/lib/kmodd/agent.log; exit 0; }
wait_step changed || exit 1
section changed.status; agentctl status
section changed.modules; grep "^kmm_ci_fw " /proc/modules
ack changed
wait_step checked || exit 1
i=0
until [ "$(agentctl status | grep -cE 'kmm-demo/kmm-ci +[a-z]+ +Passed')" -eq 4 ]; do
  i=$((i + 1)); [ $i -lt 600 ] || break; usleep 100000
done
section checked.status; agentctl status
ack checked
wait_step rolledback || exit 1
section rolledback.status; agentctl status
section rolledback.modules; grep "^kmm_ci_fw " /proc/modules
section rolledback.events; agentctl events --replay 2>&1 | grep -E "PhaseChanged.*kmm-demo/kmm-ci"
ack rolledback
wait_step deleted || exit 1
wait_unloaded && echo unloaded
section deleted.modules; grep "^kmm_ci_fw " /proc/modules
section deleted.firmware; find /var/lib/kmodd/firmware -path '*kmm_ci_fw/fw.bin'
section deleted.status; agentctl status
ack deleted
wait_step stopped || exit 1
sleep 5
section stopped.modules; grep "^kmm_ci_fw " /proc/modules
section stopped.status; agentctl status
ack stopped
stop_agent
section boot1.log; cat /var/lib/kmodd/agent.log
EOF
cat >"$tmp/guest/boot2.sh" <<'EOF'
. /kmodd-test/lib.sh
sh /kmodd-test/agent.sh
wait_loaded 900 && echo reloaded
section reboot.modules; grep "^kmm_ci_fw " /proc/modules
section reboot.firmware; find /var/lib/kmodd/firmware -path '*kmm_ci_fw/fw.bin'
section reboot.status; agentctl status
stop_agent
section boot2.log; cat /var/lib/kmodd/agent.log
EOF
((demo)) && touch "$tmp/guest/demo"
((bench)) && touch "$tmp/guest/bench"
cp "$tmp/pki/ca.pem" "$tmp/guest/pki/"

boot() {  # boot N: runs bootN.sh in the guest, in the background (vm_pid)
  "$root/tools/vm/run" --net --state "$tmp/state.img" --timeout 600 --mem 768M \
    --bin "$tmp/bin/kmodd-agent:/usr/bin/kmodd-agent" --bin "$tmp/bin/agentctl:/usr/bin/agentctl" \
    --tree "$tmp/guest:/kmodd-test" --tree "$tmp/guest/pki:/etc/kmodd" \
    --dmesg "$tmp/dmesg$1" -- sh "/kmodd-test/boot$1.sh" >"$tmp/vm$1.out" 2>"$tmp/vm$1.err" &
  vm_pid=$!
  vm_err=$tmp/vm$1.err
  pids+=("$vm_pid")
}

# --- step 1: Loaded ------------------------------------------------------------------------
boot 1
wait_status "Loaded $digest_v1" 240
if ((demo)); then
  # While the agent is still connected: after the ack below the guest stops it, and the
  # status would then say "agent disconnected".
  "$bin/kmodd-controller" status --status-file "$tmp/status.yaml" >"$tmp/ctl-status.txt" 2>&1
  "$bin/kmodd-controller" status --status-file "$tmp/status.yaml" --nodes >>"$tmp/ctl-status.txt" 2>&1
fi
step loaded
wait_ack loaded 60
if ((demo)); then
  wait "$vm_pid"
  echo "\$ agentctl status            # on the node (in the VM)"
  sec "$tmp/vm1.out" loaded.status
  echo "\$ grep kmm_ci_fw /proc/modules"
  sec "$tmp/vm1.out" loaded.modules
  echo
  echo "\$ kmodd-controller status; kmodd-controller status --nodes   # on the host"
  cat "$tmp/ctl-status.txt"
  [[ -n $(sec "$tmp/vm1.out" loaded.modules) ]] || fail "kmm_ci_fw is not in the VM's /proc/modules"
  exit 0
fi

if ((bench)); then
  : >"$tmp/t0"
  for ((i = 0; i < bench; i++)); do
    rm "$tmp/modules/kmm-ci.yaml"
    wait_status absent 120
    sleep 0.3  # let the unload's reports settle
    date +%s%3N >>"$tmp/t0"
    module_file v1
    wait_status "Loaded" 120
  done
  step "done"
  wait "$vm_pid"
  python3 - "$tmp/t0" "$tmp/controller.log" "$tmp/vm1.out" <<'PY'
import json, statistics, sys
from datetime import datetime, timezone
t0 = [int(x) for x in open(sys.argv[1]).read().split()]
def ms(ts):
    return int(datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp() * 1000)
loaded = []
for line in open(sys.argv[2]):
    try:
        j = json.loads(line)
    except ValueError:
        continue
    if j.get("msg") == "module phase" and j.get("phase") == "Loaded" and j.get("node") == "kmodd-vm":
        loaded.append(ms(j["ts"]))
kernel = []
for line in open(sys.argv[3]):
    try:
        j = json.loads(line)
    except ValueError:
        continue
    if j.get("msg") == "module loaded":
        kernel.append(j["ms"])
kernel = kernel[-len(t0):]  # the first load is the initial one
rows = []
for i, t in enumerate(t0):
    total = min(x for x in loaded if x >= t) - t
    rows.append((total, kernel[i], total - kernel[i]))
print("run  file->Loaded ms  agent load ms  overhead ms")
for i, (a, b, c) in enumerate(rows):
    print(f"{i + 1:3}  {a:15}  {b:13}  {c:11}")
print(f"median  {statistics.median(r[0] for r in rows):10}  {statistics.median(r[1] for r in rows):13}  {statistics.median(r[2] for r in rows):11}")
PY
  exit 0
fi

# --- step 2: a new image -------------------------------------------------------------------
module_file v2
wait_status "Loaded $digest_v2" 120
step changed
wait_ack changed 60

# --- step 2b: readiness checks, a failing one, rollback --------------------------------------
cat >"$tmp/policy-good.yaml" <<'EOF'
apiVersion: kmodd.io/v1alpha1
kind: ModulePolicy
metadata: {name: kmm-ci, namespace: kmm-demo}
spec:
  moduleName: kmm-ci
  readiness:
    checks:
    - name: live
      path: {path: /sys/module/kmm_ci_fw/initstate, equals: live}
    - name: refcount
      stable: {path: /sys/module/kmm_ci_fw/refcnt, seconds: 2}
      timeoutSeconds: 20
    - name: device
      devices: {glob: "/dev/nul*"}
    - name: probe
      kernelLog: {pattern: "kmm_ci_fw.*(fail|error)", seconds: 2}
EOF
{ cat "$tmp/policy-good.yaml"; cat <<'EOF'
    - name: fw-mode
      path: {path: /sys/module/kmm_ci_fw/parameters/fw_mode}
      timeoutSeconds: 3
EOF
} >"$tmp/policy-bad.yaml"
rollout_field() {  # rollout_field FIELD: status.rollout.FIELD of the Module, as JSON
  "$bin/kmodd-controller" status --status-file "$tmp/status.yaml" -o json 2>/dev/null | python3 -c '
import json, sys
for m in json.load(sys.stdin).get("modules", []):
    if m.get("name") == "kmm-ci":
        print(json.dumps(((m.get("status") or {}).get("rollout") or {}).get(sys.argv[1])))' "$1"
}
module_file v2 "$tmp/policy-good.yaml"
# The checks reach the node without a reload; it is Ready once they pass (the stable one
# takes 2 s, the kernel log's window 2 s): the guest says when agentctl shows all four.
step checked
wait_ack checked 120
wait_status "Loaded $digest_v2" 120
module_file v1 "$tmp/policy-bad.yaml"
rolled_back() { [[ $(rollout_field rolledBack) == 1 ]]; }
eventually 180 rolled_back || { show "$tmp/controller.log"; show "$tmp/status.yaml"; fail "the node was not rolled back after its check failed (rolledBack $(rollout_field rolledBack))"; }
wait_status "Loaded $digest_v2" 120
failed=$(rollout_field failedNodes)
[[ $failed == *'readiness check \"fw-mode\" (path) failed: /sys/module/kmm_ci_fw/parameters/fw_mode does not exist after 3 s'* ]] \
  || { show "$tmp/status.yaml"; fail "the rollout's failed node does not name the check and what was seen: $failed"; }
note "2b. v1 failed its check ($failed); rolled back to v2 and Loaded"
step rolledback
wait_ack rolledback 60

# --- step 3: the Module deleted ------------------------------------------------------------
rm "$tmp/modules/kmm-ci.yaml"
wait_status absent 120
step deleted
wait_ack deleted 60

# --- step 4: the controller away -------------------------------------------------------------
module_file v1
wait_status "Loaded $digest_v1" 120
{ kill -9 "$controller_pid"; wait "$controller_pid"; } 2>/dev/null
step stopped
wait_ack stopped 60
wait "$vm_pid"
vm_rc=$?

# --- step 5: reboot without controller or registry -------------------------------------------
"$root/tools/registry/stop" "$tmp/reg" >/dev/null 2>&1
boot 2
wait "$vm_pid"
vm2_rc=$?

# --- the checks ------------------------------------------------------------------------------
out1=$tmp/vm1.out
out2=$tmp/vm2.out
[[ $vm_rc == 0 ]] || { show "$out1"; show "$tmp/vm1.err"; fail "first boot: guest script exit $vm_rc"; }
[[ $vm2_rc == 0 ]] || { show "$out2"; show "$tmp/vm2.err"; fail "second boot: guest script exit $vm2_rc"; }
expect_sec() {  # expect_sec FILE SECTION TEXT
  sec "$1" "$2" | grep -qF -- "$3" || { show "$1"; fail "section $2: missing \"$3\""; }
}
expect_sec_empty() {  # expect_sec_empty FILE SECTION
  [[ -z $(sec "$1" "$2") ]] || { show "$1"; fail "section $2 should be empty"; }
}
# 1. Loaded, firmware staged and loaded by the module.
expect_sec "$out1" loaded.modules "kmm_ci_fw "
expect_sec "$out1" loaded.firmware "kmm_ci_fw/fw.bin"
expect_sec "$out1" loaded.status "kmm-demo/kmm-ci"
expect_sec "$out1" loaded.status "Loaded"
grep -q "kmm_ci_fw: firmware kmm_ci_fw/fw.bin loaded" "$tmp/dmesg1" || { show "$tmp/dmesg1"; fail "the module did not get its firmware"; }
# 2. Reloaded from v2.
expect_sec "$out1" changed.modules "kmm_ci_fw "
expect_sec "$out1" changed.status "${digest_v2:7:12}"  # agentctl shows 12 hex
# 2b. Ready on v2 with its checks; rolled back: v2 in the kernel, its checks passed; the
# failure seen by the agent.
expect_sec "$out1" checked.status "Readiness checks:"
expect_sec "$out1" checked.status "Loaded"
sec "$out1" checked.status | grep -qE '/sys/module/kmm_ci_fw/initstate holds "live"' \
  || { show "$out1"; fail "section checked.status: the live check does not say what it saw"; }
expect_sec "$out1" rolledback.modules "kmm_ci_fw "
expect_sec "$out1" rolledback.status "${digest_v2:7:12}"
expect_sec "$out1" rolledback.status "Readiness checks:"
for check in live refcount device probe; do
  sec "$out1" rolledback.status | grep -qE "kmm-demo/kmm-ci +$check +Passed" \
    || { show "$out1"; fail "section rolledback.status: check $check did not pass on v2"; }
done
expect_sec "$out1" rolledback.events "Available"
expect_sec "$out1" rolledback.events 'readiness check "fw-mode" (path) failed: /sys/module/kmm_ci_fw/parameters/fw_mode does not exist after 3 s'
# 3. Deleted: unloaded, firmware gone.
grep -qx unloaded "$out1" || { show "$out1"; fail "kmm_ci_fw was not unloaded after the Module was deleted"; }
expect_sec_empty "$out1" deleted.modules
expect_sec_empty "$out1" deleted.firmware
# 4. Controller away: still loaded.
expect_sec "$out1" stopped.modules "kmm_ci_fw "
# 5. Reboot, nothing on the host: back from journal and cache.
grep -qx reloaded "$out2" || { show "$out2"; fail "kmm_ci_fw did not come back after the reboot"; }
expect_sec "$out2" reboot.modules "kmm_ci_fw "
expect_sec "$out2" reboot.firmware "kmm_ci_fw/fw.bin"
echo "PASS: $case_name"

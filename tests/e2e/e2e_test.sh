#!/usr/bin/env bash
# Real-kernel tests of kmodd-agent: each case boots Debian's cloud kernel under qemu
# (tools/vm/run) once (the reboot case twice), copies kmodd-agent in, applies
# NodeModulesConfigs and checks apply's output, /proc/modules, sysfs and the kernel log.
#
# usage: e2e_test.sh BIN_DIR REPO_ROOT CASE
#        (ctest -L e2e runs them all; ctest -R 'e2e: reboot' one)
#
# Needs the rig (tools/vm/setup; tools/test runs it). Without it every case FAILS: these
# tests never pass by skipping.
#
# Cases (one ctest test each):
#   insert-deps-order        dependencies from modules.dep, modulesLoadingOrder, parameters,
#                            a second apply that changes nothing
#   insert-deps-order-nodep  the same from an image without modules.dep (modinfo)
#   firmware-and-unload      firmware staged, requested by the module and loaded;
#                            firmware_class.path set and restored; unload order; cleanup
#   firmware-shadows         a staged file with the name of one in the host's /lib/firmware:
#                            the kernel loads the staged one (firmware_class.path first);
#                            staged anyway, and apply warns naming both files
#   in-tree-swap             an in-tree namesake is not taken for ours; the in-tree module
#                            removed and the OOT one inserted; the Module deleted: ours
#                            gone, the in-tree one loaded again, unless another desired
#                            Module still removes it (with the holders removed to reach it);
#                            a failed reload does not hold the unload
#   in-tree-rollback         the swap failing half way: OOT insert undone, in-tree reloaded
#   in-use-refused           a module used by one loaded outside kmodd is not removed; the
#                            message names the holder; converges once it is gone
#   vermagic-refused         refused before any insert or removal; the kernel's own rule
#   udev-drift               rmmod seen by `kmodd-agent watch` (after rmmod began); repaired
#   kill9-resume             apply killed (kill -9) three times mid-way; then converges
#                            with every module inserted once
#   reboot                   two boots on one state disk: new boot id, modules loaded again
#   cleanup                  `kmodd-agent cleanup` refuses while kmodd's modules are loaded,
#                            with --unload unloads them, loads the in-tree module they
#                            replaced again (or says it could not), deletes the firmware,
#                            restores firmware_class.path and removes the state directory
set -uo pipefail
bin="$1"
root="$2"
case_name="$3"
# shellcheck source=tests/lib/harness.bash
. "$root/tests/lib/harness.bash"  # its default fail until lib.bash's, below
declare tmp
# KMODD_E2E_KEEP=1 keeps the guest's sections, the kernel log and the scripts for a look.
make_temp_dir tmp kmodd-e2e KMODD_E2E_KEEP
g=$tmp/sections  # the guest's output, one file per section
mkdir -p "$g" "$tmp/guest" "$tmp/trees"

# shellcheck source=tests/e2e/lib.bash
. "$(dirname "$0")/lib.bash"

# --- the cases ---------------------------------------------------------------------------
case_insert_deps() {  # insert_deps IMAGE: dependencies and loading order from IMAGE
  local image=$1
  {
    # Dependencies: kmm_ci_dep_user needs kmm_ci_dep_base's symbol.
    module deps "$image" kmm_ci_dep_user
    # Order: kmm_ci_a loads after dummy (load last to first), though neither needs the other.
    module ordered "$image" kmm_ci_a "$(printf '%s\n' 'modprobe.parameters: [greeting=e2e, count=3]' \
      'modprobe.modulesLoadingOrder: [kmm_ci_a, dummy]')"
  } | config desired.yaml
  guest <<'EOF'
apply first desired.yaml
snap first
put greeting /sys/module/kmm_ci_a/parameters/greeting
put count /sys/module/kmm_ci_a/parameters/count
put dummy.version /sys/module/dummy/version
apply again desired.yaml
snap again
EOF
  boot
  expect_rc first 0
  expect_in "$(sec first.out)" "converged: true"
  expect_loaded first kmm_ci_dep_base kmm_ci_dep_user kmm_ci_a dummy
  expect_in "$(sec first.modules)" "kmm_ci_dep_base 16384 1 kmm_ci_dep_user,"
  expect_before "$g/dmesg" "kmm_ci_dep_base: loaded" "kmm_ci_dep_user: loaded, base value=42"
  expect_before "$g/dmesg" "kmodd test dummy loaded" "kmm_ci_a: loaded, greeting=e2e count=3"
  expect_in "$(sec greeting)" e2e
  expect_in "$(sec count)" 3
  expect_in "$(sec dummy.version)" kmodd-test-1.0.0
  # A second apply finds everything in place and inserts nothing.
  expect_rc again 0
  expect_in "$(sec again.out)" "converged: true"
  expect_count "$g/dmesg" "kmm_ci_a: loaded" 1
  expect_count "$g/dmesg" "kmm_ci_dep_user: loaded" 1
  expect_count "$g/dmesg" "kmodd test dummy loaded" 1
}

case_firmware_and_unload() {
  {
    module fw /img kmm_ci_fw 'modprobe.firmwarePath: /firmware'
    module deps /img kmm_ci_dep_user 'modprobe.modulesLoadingOrder: [kmm_ci_dep_user, kmm_ci_dep_base]'
  } | config desired.yaml
  guest <<'EOF'
mkdir -p /custom/fw
echo -n /custom/fw >/sys/module/firmware_class/parameters/path
apply load desired.yaml --firmware-class-path
snap load
put load.fwpath /sys/module/firmware_class/parameters/path
run load.cmp cmp /img/firmware/kmm_ci_fw/fw.bin /var/lib/firmware/kmm_ci_fw/fw.bin
apply unload empty.yaml --firmware-class-path
snap unload
put unload.fwpath /sys/module/firmware_class/parameters/path
run unload.ls ls -A /var/lib/firmware
EOF
  boot
  expect_rc load 0
  expect_in "$(sec load.out)" "converged: true"
  expect_loaded load kmm_ci_fw kmm_ci_dep_base kmm_ci_dep_user
  # Staged without a module-name level, at the path the module asks for, and loaded by it.
  expect_rc load.cmp 0
  expect_in "$(sec load.out)" "- kmm_ci_fw/fw.bin"
  expect_in "$(sec load.fwpath)" /var/lib/firmware
  expect_in "$g/dmesg" "kmm_ci_fw: firmware kmm_ci_fw/fw.bin loaded, size=64 first=4b4d4d43492d4657"
  expect_not_in "$g/dmesg" "Direct firmware load for kmm_ci_fw/fw.bin failed"
  # Unload: first to last of modulesLoadingOrder, firmware deleted, firmware_class.path back.
  expect_rc unload 0
  expect_in "$(sec unload.out)" "converged: true"
  expect_not_loaded unload kmm_ci_fw kmm_ci_dep_base kmm_ci_dep_user
  expect_before "$g/dmesg" "kmm_ci_dep_user: unloaded" "kmm_ci_dep_base: unloaded"
  expect_in "$g/dmesg" "kmm_ci_fw: unloaded"
  expect_not_in "$(sec unload.ls.out)" kmm_ci_fw
  expect_in "$(sec unload.fwpath)" /custom/fw
}

case_in_tree_swap() {
  module nic /img dummy | config noremove.yaml
  module nic /img dummy 'inTreeModulesToRemove: [dummy]' | config desired.yaml
  {
    module nic /img dummy 'inTreeModulesToRemove: [dummy]'
    module other /img kmm_ci_a 'inTreeModulesToRemove: [dummy]'
  } | config both.yaml
  module other /img kmm_ci_a 'inTreeModulesToRemove: [dummy]' | config other.yaml
  # The kernel's llc with its holders stp and psnap: removed with it, kept out with it.
  {
    module llc /img kmm_ci_a 'inTreeModulesToRemove: [llc]'
    module keep /img kmm_ci_dep_base 'inTreeModulesToRemove: [llc]'
  } | config llc.yaml
  module keep /img kmm_ci_dep_base 'inTreeModulesToRemove: [llc]' | config keep.yaml
  # Every apply is a new process: what it knows of the in-tree dummy it removed is only
  # what the journal on disk says, as for an agent restarted between the two.
  guest <<'EOF'
run intree modprobe dummy
put intree.version /sys/module/dummy/version
run intree.netdev test -e /sys/class/net/dummy0
apply noremove noremove.yaml
snap noremove
put noremove.version /sys/module/dummy/version
apply swap desired.yaml
snap swap
put swap.version /sys/module/dummy/version
run swap.netdev test -e /sys/class/net/dummy0
apply deleted empty.yaml
snap deleted
put deleted.version /sys/module/dummy/version
run deleted.netdev test -e /sys/class/net/dummy0
apply both both.yaml
snap both
apply shared other.yaml
snap shared
apply last empty.yaml
snap last
run last.netdev test -e /sys/class/net/dummy0
ko=$(find /lib/modules/$K -name dummy.ko)
apply again desired.yaml
mv "$ko" /tmp/dummy.ko.away
apply broken empty.yaml
snap broken
put broken.journal /var/lib/kmodd/journal.json
mv /tmp/dummy.ko.away "$ko"
apply fixed empty.yaml
snap fixed
run holders modprobe stp
run holders2 modprobe psnap
apply llc llc.yaml
snap llc
apply keep keep.yaml
snap keep
apply keep2 keep.yaml
snap keep2
apply llcgone empty.yaml
snap llcgone
EOF
  boot
  expect_rc intree 0
  expect_rc intree.netdev 0
  # Without inTreeModulesToRemove the in-tree namesake is not taken for ours.
  expect_nonzero noremove
  expect_in "$(sec noremove.out)" "another module named dummy is loaded (in-tree"
  expect_in "$(sec noremove.out)" "converged: false"
  expect_not_in "$(sec noremove.version)" kmodd-test
  # With it, the in-tree module goes and ours comes.
  expect_rc swap 0
  expect_in "$(sec swap.out)" "converged: true"
  expect_in "$(sec swap.out)" "inTreeRemoved:"
  expect_in "$(sec swap.out)" "- dummy"
  expect_loaded swap dummy
  expect_in "$(sec swap.version)" kmodd-test-1.0.0
  expect_nonzero swap.netdev  # the test dummy makes no interface: the in-tree one is gone
  expect_in "$g/dmesg" "kmodd test dummy loaded"
  # The Module deleted: ours unloaded, the in-tree dummy (and its interface) back.
  expect_rc deleted 0
  expect_in "$(sec deleted.out)" "converged: true"
  expect_loaded deleted dummy
  expect_not_in "$(sec deleted.version)" kmodd-test
  expect_rc deleted.netdev 0
  # Two Modules remove it: deleting one keeps it out; deleting the other brings it back.
  expect_rc both 0
  expect_loaded both dummy kmm_ci_a
  expect_rc shared 0
  expect_in "$(sec shared.out)" "converged: true"
  expect_not_loaded shared dummy
  expect_loaded shared kmm_ci_a
  expect_in "$(sec shared.out)" "message: kept out by a desired Module"
  expect_rc last 0
  expect_not_loaded last kmm_ci_a
  expect_loaded last dummy
  expect_rc last.netdev 0
  # The reload fails (the host's dummy.ko is gone): reported, and ours is unloaded all
  # the same; the record stays, and the next apply loads it.
  expect_rc again 0
  expect_nonzero broken
  expect_in "$(sec broken.err)" "reloading in-tree module dummy (removed for e2e/nic): insert dummy"
  expect_in "$(sec broken.err)" "dummy.ko is listed in modules.dep but missing"
  expect_in "$(sec broken.out)" "converged: false"
  expect_not_loaded broken dummy
  expect_count "$g/dmesg" "kmodd test dummy unloaded" 3
  expect_not_in "$(sec broken.journal)" '"e2e/nic": {'
  expect_in "$(sec broken.journal)" '"removedFor": "e2e/nic"'
  expect_rc fixed 0
  expect_in "$(sec fixed.out)" "converged: true"
  expect_loaded fixed dummy
  # Holders: removed before llc, kept out while a desired Module keeps llc out (loading
  # one would load llc: no flapping), loaded again after it.
  expect_rc holders 0
  expect_rc holders2 0
  expect_rc llc 0
  expect_not_loaded llc llc stp psnap
  expect_loaded llc kmm_ci_a kmm_ci_dep_base
  expect_rc keep 0
  expect_not_loaded keep llc stp psnap kmm_ci_a
  expect_rc keep2 0
  expect_not_loaded keep2 llc stp psnap
  expect_rc llcgone 0
  expect_in "$(sec llcgone.out)" "converged: true"
  expect_not_loaded llcgone kmm_ci_dep_base
  expect_loaded llcgone llc stp psnap
  # Last removed first: removed psnap, stp, llc (holders in name order, then llc), so
  # loaded llc, stp, psnap; /proc/modules lists the newest first.
  expect_before "$(sec llcgone.modules)" "psnap " "stp "
  expect_before "$(sec llcgone.modules)" "stp " "llc "
}

case_in_tree_rollback() {
  # The swap fails half way: the OOT dummy goes in (loaded last to first), then kmm_ci_fw
  # fails its init (no firmwarePath, so no firmware). Both inserts and the removal of the
  # in-tree dummy must be undone.
  module nic /img kmm_ci_fw "$(printf '%s\n' 'inTreeModulesToRemove: [dummy]' \
    'modprobe.modulesLoadingOrder: [kmm_ci_fw, dummy]')" | config desired.yaml
  guest <<'EOF'
run intree modprobe dummy
apply swap desired.yaml
snap swap
put swap.version /sys/module/dummy/version
run swap.netdev test -e /sys/class/net/dummy0
EOF
  boot
  expect_rc intree 0
  expect_nonzero swap
  cat "$(sec swap.out)" "$(sec swap.err)" >"$tmp/swap.all"
  expect_in "$tmp/swap.all" "rolled back"
  expect_in "$tmp/swap.all" "reloaded in-tree dummy"
  expect_in "$tmp/swap.all" "removed dummy"
  expect_in "$g/dmesg" "kmodd test dummy loaded"
  expect_in "$g/dmesg" "kmodd test dummy unloaded"
  expect_in "$g/dmesg" "Direct firmware load for kmm_ci_fw/fw.bin failed"
  expect_loaded swap dummy
  expect_not_loaded swap kmm_ci_fw
  expect_not_in "$(sec swap.version)" kmodd-test  # the in-tree dummy is back
  expect_rc swap.netdev 0
}

case_in_use_refused() {
  module base /img kmm_ci_dep_base | config desired.yaml
  guest <<'EOF'
apply load desired.yaml
run outsider insmod $M/kmm_ci_dep_user.ko
apply refused empty.yaml
snap refused
run outsider.gone rmmod kmm_ci_dep_user
apply unload empty.yaml
snap unload
EOF
  boot
  expect_rc load 0
  expect_rc outsider 0
  # Something outside kmodd uses kmm_ci_dep_base: its removal is refused, naming the user.
  expect_nonzero refused
  cat "$(sec refused.out)" "$(sec refused.err)" >"$tmp/refused.all"
  expect_in "$tmp/refused.all" "remove kmm_ci_dep_base: in use"
  expect_in "$tmp/refused.all" "holders kmm_ci_dep_user"
  expect_in "$(sec refused.out)" "converged: false"
  expect_loaded refused kmm_ci_dep_base kmm_ci_dep_user
  # Once the user is gone, the same apply converges.
  expect_rc outsider.gone 0
  expect_rc unload 0
  expect_in "$(sec unload.out)" "converged: true"
  expect_not_loaded unload kmm_ci_dep_base
}

case_vermagic() {
  local t
  for v in bad other; do
    t=$tmp/trees/$v/opt/lib/modules/$K
    mkdir -p "$t"
    cp "$KMODD_TEST_IMAGE_NODEP/opt/lib/modules/$K/kmm_ci_a.ko" "$t/"
  done
  cp "$KMODD_TEST_BADVERMAGIC_KO" "$tmp/trees/bad/opt/lib/modules/$K/kmm_ci_a.ko"
  cp "$KMODD_TEST_OTHERRELEASE_KO" "$tmp/trees/other/opt/lib/modules/$K/kmm_ci_a.ko"
  module a /trees/bad kmm_ci_a 'inTreeModulesToRemove: [dummy]' | config bad.yaml
  module a /trees/other kmm_ci_a | config other.yaml
  guest <<'EOF'
run intree modprobe dummy
apply bad bad.yaml
snap bad
run bad.netdev test -e /sys/class/net/dummy0
apply other other.yaml
snap other
EOF
  boot
  expect_rc intree 0
  expect_nonzero bad
  cat "$(sec bad.out)" "$(sec bad.err)" >"$tmp/bad.all"
  expect_in "$tmp/bad.all" "vermagic mismatch for kmm_ci_a"
  expect_in "$tmp/bad.all" "kmmcibroken"
  expect_not_loaded bad kmm_ci_a
  # Refused before anything changed: the kernel never saw the file, the in-tree module
  # named in inTreeModulesToRemove is still there.
  expect_not_in "$g/dmesg" "version magic"
  expect_loaded bad dummy
  expect_rc bad.netdev 0
  # The check follows the kernel's rule: another release with the same flags loads.
  expect_rc other 0
  expect_loaded other kmm_ci_a
}

case_udev_drift() {
  module a /img kmm_ci_a | config desired.yaml
  guest <<'EOF'
apply load desired.yaml
$A watch --count 2 --timeout 30 -o json >/tmp/events 2>/tmp/watch.err &
w=$!
i=0
while ! grep -q listening /tmp/watch.err && [ $i -lt 2000 ]; do usleep 5000; i=$((i + 1)); done
$T -o /tmp/rmmod.time rmmod kmm_ci_a
snap drift
apply reload desired.yaml
wait $w
sec watch.rc; echo $?
put events /tmp/events
put watch.err /tmp/watch.err
put rmmod.time /tmp/rmmod.time
snap reload
EOF
  boot
  expect_rc load 0
  expect_not_loaded drift kmm_ci_a
  expect_rc watch 0
  expect_in "$(sec events)" '"action":"remove","module":"kmm_ci_a"'
  expect_in "$(sec events)" '"action":"add","module":"kmm_ci_a"'
  local start elapsed seen latency
  read -r start elapsed _ <"$(sec rmmod.time)"
  seen=$(grep '"action":"remove"' "$(sec events)" | sed 's/.*"monotonicUs":\([0-9]*\).*/\1/')
  [[ -n $start && -n $seen ]] || fail "no rmmod start time or event time"
  latency=$((seen - start))
  note "remove event received $((latency / 1000)).$(printf '%03d' $((latency % 1000))) ms after rmmod" \
       "started (rmmod took $((elapsed / 1000)) ms)"
  # Order only: how soon is a figure for tools/bench/test_latencies, not a limit that flakes
  # under emulation.
  ((latency >= 0)) || fail "the event came before rmmod started ($latency us)"
  # The drift is repaired by the next apply.
  expect_rc reload 0
  expect_in "$(sec reload.out)" "converged: true"
  expect_loaded reload kmm_ci_a
  expect_count "$g/dmesg" "kmm_ci_a: loaded" 2
}

case_kill9() {
  {
    module deps /img kmm_ci_dep_user 'modprobe.modulesLoadingOrder: [kmm_ci_dep_user, kmm_ci_dep_base]'
    module fw /img kmm_ci_fw 'modprobe.firmwarePath: /firmware'
    module a /img kmm_ci_a
  } | config desired.yaml
  # Three applies killed in turn, each once the journal shows an operation in progress
  # past the Modules the previous ones finished (Modules are done in name order).
  guest <<'EOF'
J=/var/lib/kmodd/journal.json
for r in 0 1 2; do
  $A apply -f /e2e/desired.yaml --firmware-class-path >/tmp/killed$r.out 2>&1 &
  p=$!
  i=0
  while [ $i -lt 20000 ] && kill -0 $p 2>/dev/null; do
    s=$(cat $J 2>/dev/null)  # one read: the apply rewrites it as we look
    case $s in *'"phase": "Loading"'*)
      [ "$(echo "$s" | grep -c '"phase": "Loaded"')" -ge $r ] && break ;;
    esac
    i=$((i + 1))
  done
  kill -9 $p
  sec killed$r.kill.rc; echo $?
  wait $p
  put killed$r.out /tmp/killed$r.out
  put killed$r.journal $J
  snap killed$r
done
apply resume desired.yaml --firmware-class-path
snap resume
apply again desired.yaml --firmware-class-path
EOF
  boot
  local r landed_later=0
  for r in 0 1 2; do
    # kill found the process and it had not printed its report: it died mid-apply. The
    # first kill always lands (the whole apply is ahead of it); a later apply may win the
    # race, but at least one later kill must land with an operation in progress (the
    # journal says Loading), or this run proved nothing about resuming a half-done apply.
    if [[ $(cat "$(sec "killed$r.kill.rc")") != 0 || -s $(sec "killed$r.out") ]]; then
      ((r > 0)) || { show "$(sec "killed$r.out")"; fail "apply $r finished before kill -9"; }
      note "kill $r: the apply finished first"
      continue
    fi
    local phases
    phases=$(grep -o '"phase": "[A-Za-z]*"' "$(sec "killed$r.journal")" | sed 's/"phase": //' \
      | tr -d '"' | tr '\n' ' ')
    if ((r > 0)) && [[ " $phases " == *" Loading "* ]]; then
      landed_later=$((landed_later + 1))
    fi
    note "kill $r: journal $phases; loaded: $(grep -o '^kmm_ci[a-z_]*' \
      "$(sec "killed$r.modules")" | tr '\n' ' ')"
  done
  ((landed_later > 0)) || fail "no later kill -9 landed while an operation was in progress"
  expect_rc resume 0
  expect_in "$(sec resume.out)" "converged: true"
  expect_loaded resume kmm_ci_dep_base kmm_ci_dep_user kmm_ci_fw kmm_ci_a
  expect_rc again 0
  # Each module inserted exactly once over the killed apply and the two that followed.
  expect_count "$g/dmesg" "kmm_ci_dep_base: loaded" 1
  expect_count "$g/dmesg" "kmm_ci_dep_user: loaded" 1
  expect_count "$g/dmesg" "kmm_ci_fw: firmware kmm_ci_fw/fw.bin loaded" 1
  expect_count "$g/dmesg" "kmm_ci_a: loaded" 1
}

case_cleanup() {
  {
    module fw /img kmm_ci_fw "$(printf '%s\n' 'inTreeModulesToRemove: [dummy]' \
      'modprobe.firmwarePath: /firmware')"
    module deps /img kmm_ci_dep_user
  } | config desired.yaml
  guest <<'EOF'
run intree modprobe dummy
mkdir -p /custom/fw
echo -n /custom/fw >/sys/module/firmware_class/parameters/path
apply load desired.yaml --firmware-class-path
run refused $A cleanup --firmware-class-path
snap refused
run refused.ls ls -A /var/lib/kmodd
run unload $A cleanup --unload --firmware-class-path
snap unload
put unload.fwpath /sys/module/firmware_class/parameters/path
run unload.fw ls -A /var/lib/firmware
run unload.state ls -d /var/lib/kmodd
run again $A cleanup
ko=$(find /lib/modules/$K -name dummy.ko)
apply reload desired.yaml --firmware-class-path
mv "$ko" /tmp/dummy.ko.away
run broken $A cleanup --unload --firmware-class-path
snap broken
run broken.state ls -d /var/lib/kmodd
mv /tmp/dummy.ko.away "$ko"
EOF
  boot
  expect_rc intree 0
  expect_rc load 0
  # Refused: nothing unloaded, nothing removed, and it says what is loaded and what to do.
  expect_nonzero refused
  expect_not_loaded refused dummy
  expect_in "$(sec refused.err)" "Module e2e/fw: kmm_ci_fw"
  expect_in "$(sec refused.err)" "Module e2e/deps: kmm_ci_dep_base, kmm_ci_dep_user"
  expect_in "$(sec refused.err)" "--unload"
  expect_loaded refused kmm_ci_fw kmm_ci_dep_base kmm_ci_dep_user
  expect_in "$(sec refused.ls.out)" journal.json
  # --unload: the kernel, the firmware directory and firmware_class.path as before kmodd.
  expect_rc unload 0
  expect_not_loaded unload kmm_ci_fw kmm_ci_dep_base kmm_ci_dep_user
  expect_in "$(sec unload.out)" "unloaded Module e2e/fw: kmm_ci_fw"
  # The in-tree module the fw Module removed is loaded again.
  expect_loaded unload dummy
  expect_in "$(sec unload.out)" "reloaded in-tree dummy (removed for Module e2e/fw)"
  expect_in "$(sec unload.out)" "removed /var/lib/kmodd/journal.json"
  expect_in "$(sec unload.out)" "removed /var/lib/kmodd"
  expect_in "$(sec unload.fwpath)" /custom/fw
  expect_not_in "$(sec unload.fw.out)" kmm_ci_fw
  expect_nonzero unload.state
  expect_rc again 0
  expect_in "$(sec again.out)" "nothing to remove"
  # The in-tree dummy cannot be loaded again (its file is gone): cleanup still unloads and
  # removes everything, names what it left and how to load it, and exits 1.
  expect_rc reload 0
  expect_nonzero broken
  expect_in "$(sec broken.out)" "unloaded Module e2e/fw: kmm_ci_fw"
  expect_in "$(sec broken.out)" "left in-tree module dummy: not loaded again: "
  expect_in "$(sec broken.out)" "; load it with modprobe dummy"
  expect_in "$(sec broken.out)" "removed /var/lib/kmodd"
  expect_not_loaded broken kmm_ci_fw kmm_ci_dep_base kmm_ci_dep_user dummy
  expect_nonzero broken.state
}

case_firmware_shadows() {
  module fw /img kmm_ci_fw 'modprobe.firmwarePath: /firmware' | config desired.yaml
  guest <<'EOF'
mkdir -p /lib/firmware/kmm_ci_fw
printf 'HOST-FIRMWARE-00' >/lib/firmware/kmm_ci_fw/fw.bin
run host insmod $M/kmm_ci_fw.ko
run host.rm rmmod kmm_ci_fw
apply load desired.yaml --firmware-class-path
snap load
run load.cmp cmp /img/firmware/kmm_ci_fw/fw.bin /var/lib/firmware/kmm_ci_fw/fw.bin
run host.cmp cmp /lib/firmware/kmm_ci_fw/fw.bin /var/lib/firmware/kmm_ci_fw/fw.bin
apply unload empty.yaml --firmware-class-path
EOF
  boot
  # Without kmodd the kernel loads the host's file (16 bytes, "HOST-FIR").
  expect_rc host 0
  expect_in "$g/dmesg" "kmm_ci_fw: firmware kmm_ci_fw/fw.bin loaded, size=16 first=484f53542d464952"
  # With kmodd's staged copy on firmware_class.path, the staged one: staged, not refused.
  expect_rc load 0
  expect_in "$(sec load.out)" "converged: true"
  expect_loaded load kmm_ci_fw
  expect_rc load.cmp 0
  expect_nonzero host.cmp
  expect_in "$g/dmesg" "kmm_ci_fw: firmware kmm_ci_fw/fw.bin loaded, size=64 first=4b4d4d43492d4657"
  # And kmodd says so, naming both files, in the report and on stderr.
  local w="staged firmware /var/lib/firmware/kmm_ci_fw/fw.bin shadows the host's /lib/firmware/kmm_ci_fw/fw.bin: the kernel loads the staged file instead"
  expect_in "$(sec load.out)" "warnings:"
  expect_in "$(sec load.out)" "$w"
  expect_in "$(sec load.err)" "warning: e2e/fw: $w"
  expect_rc unload 0
}

case_reboot() {
  {
    module a /img kmm_ci_a
    module fw /img kmm_ci_fw 'modprobe.firmwarePath: /firmware'
  } | config desired.yaml
  local state=$tmp/state.img boot1 boot2
  guest <<'EOF'
apply first desired.yaml --firmware-class-path
EOF
  boot --state "$state"
  expect_rc first 0
  boot1=$(field first bootId)
  guest <<'EOF'
put before.journal /var/lib/kmodd/journal.json
snap before
apply second desired.yaml --firmware-class-path
snap second
EOF
  boot --state "$state"
  boot2=$(field second bootId)
  # The journal from the first boot is on the state disk; nothing of it is loaded now.
  expect_in "$(sec before.journal)" "\"bootId\": \"$boot1\""
  expect_not_loaded before kmm_ci_a kmm_ci_fw
  expect_rc second 0
  expect_in "$(sec second.out)" "converged: true"
  [[ -n $boot1 && -n $boot2 && $boot1 != "$boot2" ]] \
    || fail "bootId did not change across the reboot: \"$boot1\" then \"$boot2\""
  expect_loaded second kmm_ci_a kmm_ci_fw
  expect_count "$g/dmesg" "kmm_ci_a: loaded" 1
  expect_count "$g/dmesg" "kmm_ci_fw: firmware kmm_ci_fw/fw.bin loaded" 1
}

micros() { local t=${EPOCHREALTIME/./}; echo "${t#0}"; }
start=$(micros)
case "$case_name" in
  insert-deps-order) case_insert_deps /img ;;
  insert-deps-order-nodep) case_insert_deps /img-nodep ;;
  firmware-and-unload) case_firmware_and_unload ;;
  firmware-shadows) case_firmware_shadows ;;
  in-tree-swap) case_in_tree_swap ;;
  in-tree-rollback) case_in_tree_rollback ;;
  in-use-refused) case_in_use_refused ;;
  vermagic-refused) case_vermagic ;;
  udev-drift) case_udev_drift ;;
  kill9-resume) case_kill9 ;;
  reboot) case_reboot ;;
  cleanup) case_cleanup ;;
  *) fail "unknown case $case_name" ;;
esac
took=$((($(micros) - start) / 100000))
echo "ok: $case_name ($((took / 10)).$((took % 10)) s, ${n_boot:-0} boot(s))"

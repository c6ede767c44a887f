#!/usr/bin/env bash
# The real agent in the qemu real-kernel VM as a Kubernetes node: a real kube-apiserver
# (tools/kube) with Node objects kmodd-vm (the VM) and kmodd-sim-a0, kmodd-sim-b0 (simulated
# agents, kmodd-loadgen), kmodd-controller on the host in --kubernetes mode with its
# self-managed certificates (a serving certificate for 10.0.2.2, how the guest reaches the
# host), every agent authenticated by a service-account token (audience kmodd) bound to a
# Pod on its node. One VM boot:
#   1. create the demo Module (examples/demo/kmm-ci.yaml, v1): kmm_ci_fw loaded in the VM's
#      kernel, status.moduleLoader available 3, the .ready label on kmodd-vm, a ModuleLoaded
#      Event for kmodd-vm;
#   2. update it (image v2): the VM's agent reloads it from v2;
#   3. delete it: the finalizer holds the Module until the VM's agent has unloaded it (when
#      the Module is gone, kmm_ci_fw is already out of the VM's /proc/modules), the labels go;
#   4. stop the VM's agent, as deleting the DaemonSet at uninstall does: nothing of kmodd's is
#      left in the VM (/var/lib/kmodd, a mount point like the pod's hostPath, empty; no
#      /run/kmodd; firmware_class.path as it was), and no kmm.node.kubernetes.io label on
#      any Node.
# Fails, never skips, without the harness (tools/kube/setup) or the rig (tools/vm/setup).
#
# usage: kube_system_test.sh BIN_DIR REPO_ROOT
set -uo pipefail
bin="$1"
root="$2"
case_name=kube-system
show() { echo "--- $(basename "$1"):"; tail -n 60 "$1" 2>/dev/null; echo "---"; }
fail() {
  echo "FAIL: $case_name: $*"
  for f in "$tmp"/*.log "$tmp"/vm1.out; do show "$f"; done
  exit 1
}
note() { echo "# $*"; }
# shellcheck source=tests/lib/harness.bash
. "$root/tests/lib/harness.bash"
# shellcheck source=tests/lib/kube.bash
. "$root/tests/lib/kube.bash"
# shellcheck source=tests/lib/vm.bash
. "$root/tests/lib/vm.bash"
# shellcheck source=tests/lib/system.bash
. "$root/tests/lib/system.bash"
declare tmp
make_temp_dir tmp kmodd-kube-system KMODD_E2E_KEEP

# --- the rig ----------------------------------------------------------------------------
vm_rig_require
K=$KMODD_VM_KERNEL
require_tools docker-registry skopeo umoci python3 openssl jq  # kubectl: from tools/kube/setup, below
vm_strip_bins "$bin" "$tmp/bin" kmodd-agent agentctl
require_bins "$bin" kmodd-controller kmodd-loadgen

# --- registry and images (as tests/system/system_test.sh) ---------------------------------
registry_start "$tmp/reg"
reg_port=${KMODD_REGISTRY##*:}
push_demo_images "$tmp/reg"
# shellcheck disable=SC2154  # set by push_demo_images
note "images: v1 $digest_v1, v2 $digest_v2"

# --- the API server: CRD, Nodes, Pods for the agents' tokens -------------------------------
kube_start "$tmp/kube"
export KUBECONFIG=$KMODD_KUBE_KUBECONFIG
ns=kmodd-system
kube_crd_install
kubectl create namespace "$ns" >/dev/null
kubectl create namespace kmm-demo >/dev/null
kubectl -n "$ns" create serviceaccount kmodd-agent >/dev/null
nodes=(kmodd-vm kmodd-sim-a0 kmodd-sim-b0)
for n in "${nodes[@]}"; do
  kubectl apply -f - >/dev/null <<YAML || fail "cannot create Node $n"
apiVersion: v1
kind: Node
metadata: {name: $n, labels: {kubernetes.io/hostname: $n, kmodd.io/demo: "true"}}
YAML
  kube_node_info "$n" "$K" "boot-$n" kmodd
  kube_agent_token "$n" "$ns" "$tmp/token-$n"
done

# --- the controller, its certificates, the simulated agents --------------------------------
kube_guest_controller "$ns"
cp "$tmp/token-kmodd-vm" "$tmp/guest/etc/token"
for s in a b; do
  "$bin/kmodd-loadgen" --controller "127.0.0.1:$ctl_port" --agents 1 --name-prefix "kmodd-sim-${s}" \
    --ca "$tmp/guest/etc/ca.crt" --token-file "$tmp/token-kmodd-sim-${s}0" --kernel "$K" \
    >"$tmp/loadgen-$s.log" 2>&1 &
  pids+=($!)
done
for s in a b; do
  eventually 30 grep -q "^connected 1" "$tmp/loadgen-$s.log" || fail "simulated agent kmodd-sim-${s}0 not served"
done
note "controller on 127.0.0.1:$ctl_port (10.0.2.2 from the guest), simulated agents served"

# --- the director: the step the guest should take next (as system_test.sh) ------------------
director_start "$tmp/director"
echo "${digest_v2:7:12}" >"$tmp/director/v2"

# --- the guest ---------------------------------------------------------------------------
kube_guest_agent kmodd-vm "$ctl_port" --metrics 127.0.0.1:9464
director_guest_lib "$tmp/guest/lib.sh"
cat >"$tmp/guest/boot1.sh" <<'EOF'
. /kmodd-test/lib.sh
section before.fwpath; cat /sys/module/firmware_class/parameters/path
sh /kmodd-test/agent.sh
wait_step loaded || exit 1
section loaded.status; agentctl status
section loaded.modules; grep "^kmm_ci_fw " /proc/modules
ack loaded
wait_step changed || exit 1
want=$(wget -q -O - "$director/v2")
i=0; while ! agentctl status | grep -q "$want"; do i=$((i + 1)); [ $i -lt 1200 ] || break; usleep 100000; done
section changed.status; agentctl status
section changed.modules; grep "^kmm_ci_fw " /proc/modules
ack changed
wait_step deleted || exit 1
# No waiting: the host saw the Module gone, so the finalizer held it until this agent unloaded.
section deleted.modules; grep "^kmm_ci_fw " /proc/modules
section deleted.status; agentctl status
ack deleted
stop_agent
# /var/lib/kmodd is the VM's state disk here, as a hostPath volume in a pod: a mount point,
# emptied (its filesystem's lost+found aside) but not removable from inside.
section uninstalled.left; ls -A /var/lib/kmodd | grep -vx 'lost+found'; ls -d /run/kmodd 2>/dev/null
section uninstalled.fwpath; cat /sys/module/firmware_class/parameters/path
section boot1.log; cat /run/kmodd-agent.log
EOF
kube_guest_boot 600
expect_sec() {  # expect_sec SECTION TEXT
  sec "$tmp/vm1.out" "$1" | grep -qF -- "$2" || { show "$tmp/vm1.out"; fail "section $1: missing \"$2\""; }
}
vm_ready() { [[ " $(ready_nodes kmm-ci) " == *" kmodd-vm "* ]]; }
module_apply() {  # module_apply TAG
  sed -e "s|@REGISTRY@|10.0.2.2:$reg_port|" -e "s|@TAG@|$1|" "$root/examples/demo/kmm-ci.yaml" | kubectl apply -f - >/dev/null
}
eventually 180 grep -q '"agent connected","node":"kmodd-vm"' "$tmp/controller.log" || fail "the VM's agent never connected"
note "the VM's agent is served (token bound to the Pod on kmodd-vm)"

# --- 1. create -----------------------------------------------------------------------------
module_apply v1 || fail "cannot create the Module"
eventually 240 status_is kmm-ci 3/3/3 || fail "status.moduleLoader is $(loader kmm-ci), want 3/3/3"
eventually 20 vm_ready || fail "no .ready label on kmodd-vm (ready: '$(ready_nodes kmm-ci)')"
eventually 20 bash -c "kubectl get events -A --field-selector reason=ModuleLoaded,involvedObject.name=kmodd-vm -o name | grep -q ." \
  || fail "no ModuleLoaded Event for kmodd-vm: $(kubectl get events -A)"
step loaded
wait_ack loaded 60
note "1. created: available 3/3, kmodd-vm labelled ready, ModuleLoaded Event"

# --- 2. update -----------------------------------------------------------------------------
module_apply v2 || fail "cannot update the Module"
step changed
wait_ack changed 150
eventually 60 status_is kmm-ci 3/3/3 || fail "after the update: status.moduleLoader is $(loader kmm-ci), want 3/3/3"
vm_ready || fail "after the update: no .ready label on kmodd-vm"
note "2. updated: the guest saw v2"

# --- 3. delete -----------------------------------------------------------------------------
kubectl delete module -n kmm-demo kmm-ci --wait=false >/dev/null || fail "cannot delete the Module"
eventually 120 bash -c "! kubectl get module -n kmm-demo kmm-ci" || fail "the Module is still there"
step deleted
wait_ack deleted 60
[[ -z $(ready_nodes kmm-ci) ]] || fail "ready labels left on: $(ready_nodes kmm-ci)"
# Not only the Module's: the kernel-version label too (KMM leaves it behind at uninstall).
left_labels=$(kubectl get nodes -o json | jq -r '[.items[] | .metadata.name as $n | .metadata.labels | keys[] | select(startswith("kmm.node.kubernetes.io/")) | "\($n): \(.)"] | join(", ")')
[[ -z $left_labels ]] || fail "kmm.node.kubernetes.io labels left on nodes: $left_labels"
note "3. deleted: the Module gone, every kmm.node.kubernetes.io label gone"
wait "$vm_pid"
vm_rc=$?
[[ $vm_rc == 0 ]] || { show "$tmp/vm1.out"; show "$tmp/vm1.err"; fail "guest script exit $vm_rc"; }
# The guest's output arrives when it exits: what it saw at each step.
expect_sec loaded.modules "kmm_ci_fw "
expect_sec loaded.status "${digest_v1:7:12}"
grep -q "kmm_ci_fw: firmware kmm_ci_fw/fw.bin loaded" "$tmp/dmesg1" || { show "$tmp/dmesg1"; fail "the module did not get its firmware"; }
note "1. kmm_ci_fw was loaded in the VM's kernel from v1, with its firmware"
expect_sec changed.status "${digest_v2:7:12}"
expect_sec changed.modules "kmm_ci_fw "
[[ $(grep -c "kmm_ci_fw: firmware kmm_ci_fw/fw.bin loaded" "$tmp/dmesg1") -ge 2 ]] ||
  { show "$tmp/dmesg1"; fail "kmm_ci_fw was not loaded again for v2"; }
note "2. kmm_ci_fw was reloaded in the VM from v2"
[[ -z $(sec "$tmp/vm1.out" deleted.modules) ]] || { show "$tmp/vm1.out"; fail "kmm_ci_fw still loaded in the VM when the Module was gone"; }
python3 - "$tmp/controller.log" <<'PY' || fail "the finalizer was removed before kmodd-vm reported kmm_ci_fw gone"
import json, sys
gone = released = None
for i, line in enumerate(open(sys.argv[1])):
    try: e = json.loads(line)
    except ValueError: continue
    if e.get("node") == "kmodd-vm" and e.get("msg") == "module phase" and e.get("phase") == "Gone" and gone is None:
        gone = i
    if e.get("msg", "").endswith("finalizer removed") and released is None:
        released = i
sys.exit(0 if gone is not None and released is not None and gone < released else 1)
PY
grep -q "kmm_ci_fw: unloaded" "$tmp/dmesg1" || fail "no unload in the VM's kernel log"
note "3. kmm_ci_fw was out of the VM's /proc/modules when the finalizer let the Module go"
[[ -z $(sec "$tmp/vm1.out" uninstalled.left) ]] ||
  { show "$tmp/vm1.out"; fail "left in the VM after the agent stopped: $(sec "$tmp/vm1.out" uninstalled.left | tr '\n' ' ')"; }
[[ $(sec "$tmp/vm1.out" uninstalled.fwpath) == "$(sec "$tmp/vm1.out" before.fwpath)" ]] ||
  { show "$tmp/vm1.out"; fail "firmware_class.path not restored"; }
grep -q '"nothing desired and nothing loaded: removed the agent' "$tmp/vm1.out" ||
  { show "$tmp/vm1.out"; fail "the agent did not say it removed its state"; }
note "4. agent stopped (as at uninstall): /var/lib/kmodd (a mount point) empty, no /run/kmodd, firmware_class.path as before"
echo "PASS: $case_name"

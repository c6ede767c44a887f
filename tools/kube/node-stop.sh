# shellcheck shell=bash
# tools/kube/node stop: sourced by tools/kube/node (its variables and helpers are in scope).
# Every step is safe to repeat and looks only at what this DIR's node made.

# The pods bound to the node, deleted through the API so that the kubelet itself stops
# their containers and sandboxes, releases their IPs (CNI DEL) and unmounts their volumes:
# a pod's object goes away only once the kubelet has done all that.
drain_pods() {
  local name=$1 t0=$SECONDS left
  [[ -f $dir/kubeconfig && -x ${kubectl:-} ]] || return 0
  kubectl_ get --raw /readyz >/dev/null 2>&1 || return 0
  kubectl_ delete pods --all-namespaces --field-selector "spec.nodeName=$name" \
    --grace-period=1 --wait=false >/dev/null 2>&1 || true
  while ((SECONDS - t0 < 90)); do
    left=$(kubectl_ get pods --all-namespaces --field-selector "spec.nodeName=$name" -o name 2>/dev/null) || return 0
    [[ -z $left ]] && return 0
    sleep 0.5
  done
  log "pods still on $name after 90 s (the sweep below removes what they left): $(echo $left)"
}

# What the kubelet did not tear down: containers still in containerd. Their network
# namespaces (bind mounts under /run/netns) are collected first, for the sweep.
remove_containers() {
  local sock=$node/containerd/containerd.sock id ns
  [[ -S $sock ]] || return 0
  ctr -a "$sock" version >/dev/null 2>&1 || return 0
  for id in $(ctr -a "$sock" -n k8s.io containers ls -q 2>/dev/null); do
    ns=$(ctr -a "$sock" -n k8s.io containers info "$id" 2>/dev/null | python3 -c '
import json, sys
spec = json.load(sys.stdin).get("Spec") or {}
for n in (spec.get("linux") or {}).get("namespaces") or []:
    if n.get("type") == "network" and n.get("path"):
        print(n["path"])' 2>/dev/null) || ns=""
    [[ $ns == /var/run/netns/* || $ns == /run/netns/* ]] && echo "$ns" >>"$node/netns"
    ctr -a "$sock" -n k8s.io tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    ctr -a "$sock" -n k8s.io tasks rm -f "$id" >/dev/null 2>&1 || true
    ctr -a "$sock" -n k8s.io containers rm "$id" >/dev/null 2>&1 || true
  done
}

# Shims outlive containerd by design; theirs name our containerd's socket.
kill_shims() {
  local pid
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*$node/containerd/containerd.sock" || true); do
    ours "$pid" && kill -9 "$pid" 2>/dev/null || true
  done
}

# Every process of the node's pods lives in its cgroup root: kill what is left, remove the
# cgroups depth first.
sweep_cgroups() {
  local root ctl d pid
  root=$(cat "$node/cgroup-root" 2>/dev/null) || return 0
  [[ $root == kmodd-node-* ]] || return 0
  for ctl in $(cgroup_controllers); do
    [[ -d $ctl/$root ]] || continue
    for _ in 1 2 3; do
      for pid in $(find "$ctl/$root" -name cgroup.procs -exec cat {} + 2>/dev/null); do
        kill -9 "$pid" 2>/dev/null || true
      done
      find "$ctl/$root" -depth -type d -exec rmdir {} \; 2>/dev/null || true
      [[ -d $ctl/$root ]] || break
      sleep 0.2
    done
    [[ -d $ctl/$root ]] && log "could not remove the cgroup $ctl/$root"
  done
  return 0
}

# Mounts under DIR/node (the kubelet's rshared root, pod volumes, container rootfs), deepest
# first; and the network namespaces of containers the kubelet did not tear down.
sweep_mounts() {
  local m
  while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
  done < <(awk -v p="$node" '$5 == p || index($5, p "/") == 1 {print $5}' /proc/self/mountinfo \
             | awk '{print length, $0}' | sort -rn | cut -d' ' -f2-)
  if [[ -f $node/netns ]]; then
    while read -r m; do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
      rm -f "$m"
    done <"$node/netns"
    rm -f "$node/netns"
  fi
}

# Outside DIR: the device-plugin directory (the kubelet's socket and checkpoint, plugins'
# sockets), the sockets in the DRA directories, the /var/log/containers links into DIR, and the directories start found absent.
# Only while no other node holds the machine's lock: another one's files are not ours.
sweep_machine() {
  local f
  exec 9>"$lock_file"
  if ! flock -n 9; then
    log "another node holds $lock_file now; leaving $dp_dir to it"
    exec 9>&-
    return 0
  fi
  if [[ -d $dp_dir ]]; then
    find "$dp_dir" -mindepth 1 -maxdepth 1 \( -type s -o -name kubelet_internal_checkpoint \) \
      -delete 2>/dev/null || true
  fi
  for d in "${dra_dirs[@]}"; do
    [[ -d $d ]] && find "$d" -mindepth 1 -maxdepth 1 -type s -delete 2>/dev/null
  done
  if [[ -d /var/log/containers ]]; then
    find /var/log/containers -maxdepth 1 -type l -lname "$node/*" -delete 2>/dev/null || true
  fi
  if [[ -f $node/created ]]; then
    while read -r f; do rmdir "$f" 2>/dev/null || true; done < <(sort -r "$node/created")
  fi
  exec 9>&-
}

stop_node() {
  local name bridge
  [[ -d $node ]] || return 0
  name=$(cat "$node/name" 2>/dev/null) || name=""
  if [[ -z ${kubectl:-} ]]; then
    kubectl=$(source "$dir/env" 2>/dev/null && echo "${KMODD_KUBE_BIN:-}") || kubectl=""
    kubectl=${kubectl:+$kubectl/kubectl}
  fi
  # Nothing makes the pods again once the controller-manager is gone.
  stop_pid kcm
  if [[ -n $name && -f $node/kubelet.pid ]] && ours "$(cat "$node/kubelet.pid")"; then
    drain_pods "$name"
  fi
  stop_pid scheduler
  stop_pid kubelet 30
  remove_containers
  stop_pid containerd 15
  kill_shims
  sweep_cgroups
  sweep_mounts
  bridge=$(cat "$node/bridge" 2>/dev/null) || bridge=""
  if [[ $bridge == kmodd* ]] && ip link show "$bridge" >/dev/null 2>&1; then
    ip link del "$bridge" 2>/dev/null || log "could not delete the bridge $bridge"
  fi
  sweep_machine
  # The sockets the stopped processes leave as files (containerd's ttrpc, the kubelet's
  # pod-resources): nothing listens on them any more.
  find "$node" -type s -delete 2>/dev/null || true
  rm -f "$node/env"
}

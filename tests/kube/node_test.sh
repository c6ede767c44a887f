#!/usr/bin/env bash
# The harness's real node (tools/kube/node): kube-controller-manager, kube-scheduler and a
# kubelet with Debian's containerd and runc, against the harness's kube-apiserver.
#
# usage: node_test.sh REPO_ROOT PLUGIN_BINARY        (ctest -L kube)
#
#   1. the Node (named as a test asks: kmodd-test-node) registers and is Ready, on
#      containerd and kubelet of the pinned release
#   2. a Pod (the local pause image, a service-account token mounted) runs to Completed
#   3. a DaemonSet of kmodd-test-device-plugin, its image pulled over plain HTTP from the test
#      registry, runs on the node; the Node's allocatable shows kmodd.test/widget: 3
#   4. a Pod asking for one kmodd.test/widget runs to Completed, and it saw the device the
#      plugin's Allocate gave it (it exits 1 without KMODD_TEST_DEVICES)
#   5. stop leaves nothing: no process naming the test's directory, no mount under it, no
#      socket in the device-plugin directory, no cgroup, bridge or network namespace
#   6. the same when the API server was stopped first (no drain: stop's sweep alone), with a
#      Pod running
#
# Needs tools/kube/setup's binaries and tools/bootstrap's packages (containerd, runc,
# containernetworking-plugins, buildah, docker-registry). Without them it FAILS, never
# skips. KMODD_KUBE_KEEP=1 keeps the directory (logs) for a look.
set -uo pipefail
root=$1
plugin_bin=$2
node_name=kmodd-test-node
# Another test's node on this machine (another checkout's CI) holds the kubelet's machine-wide
# lock: wait for it, within ctest's 600 s.
export KMODD_KUBE_NODE_LOCK_TIMEOUT=${KMODD_KUBE_NODE_LOCK_TIMEOUT:-360}
dp_dir=/var/lib/kubelet/device-plugins

fail() { echo "FAIL: kube node: $*"; exit 1; }
# shellcheck source=tests/lib/harness.bash
. "$root/tests/lib/harness.bash"
declare tmp
keep_tmp=${KMODD_KUBE_KEEP:-}  # a failed node stop keeps it too
make_temp_dir tmp kmodd-node keep_tmp
dir=$tmp/kube
note() { echo "# $*"; }
ms() { date +%s%3N; }
# A zombie is gone for our purposes: PID 1 here may reap the harness's orphans late.
alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $st != Z* ]]; }
# At exit (harness.bash runs these last registered first): the node stops, drained through
# the API server, before the API server does. A node stop that failed leaves its pid files
# for another try: the directory is kept.
node_stop_at_exit() {
  "$root/tools/kube/node" stop "$dir" 2>/dev/null && return
  echo "# tools/kube/node stop failed: run tools/kube/node stop $dir"
  # shellcheck disable=SC2034  # read by name at exit (make_temp_dir's keep switch)
  keep_tmp=1
}

require_tools curl openssl python3 buildah skopeo containerd runc ctr ip
[[ -x $plugin_bin ]] || fail "$plugin_bin not found: build kmodd-test-device-plugin"
[[ $(id -u) -eq 0 ]] || fail "the kubelet and containerd need root"

# What was there before, to tell what the node leaves behind.
entries() { find "$1" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort; }  # entries DIR: names
shim_sockets() { entries /run/containerd/s; }
netns_now() { entries /run/netns; }
shims_before=$(shim_sockets)
netns_before=$(netns_now)

# --- start: API server, registry, the plugin's image, the node ---------------------------
t0=$(ms)
kube_start "$dir"
export KUBECONFIG=$KMODD_KUBE_KUBECONFIG
command -v kubectl >/dev/null || fail "kubectl not in $KMODD_KUBE_BIN: run tools/kube/setup"
registry_start "$tmp/registry"
image_env=$("$root/tools/test-device-plugin/image" --bin "$plugin_bin" "$KMODD_REGISTRY" 2>"$tmp/image.err") \
  || { cat "$tmp/image.err"; fail "tools/test-device-plugin/image failed"; }
eval "$image_env"
[[ $KMODD_TEST_DEVICE_PLUGIN_IMAGE == "$KMODD_REGISTRY/"*@sha256:* ]] || fail "no image reference: $image_env"
note "plugin image: $KMODD_TEST_DEVICE_PLUGIN_IMAGE"
t1=$(ms)
on_exit node_stop_at_exit
"$root/tools/kube/node" start --name "$node_name" --registry "$KMODD_REGISTRY" "$dir" \
  >"$tmp/node.out" 2>"$tmp/node.err" || { cat "$tmp/node.err"; fail "tools/kube/node start failed"; }
# shellcheck source=/dev/null
. "$dir/node/env"
note "node Ready $(( $(ms) - t1 )) ms after tools/kube/node start ($(( $(ms) - t0 )) ms in all)"
grep 'Ready in' "$tmp/node.err" | sed 's/^/# /'

show_node_logs() {
  echo "--- kubectl describe pods:"; kubectl describe pods -A 2>&1 | tail -n 60
  echo "--- kubelet log (errors):"; grep -E '^E' "$KMODD_NODE_KUBELET_LOG" | tail -n 30
  echo "--- containerd log (errors):"; grep -E 'level=error' "$KMODD_NODE_CONTAINERD_LOG" | tail -n 20
}
# wait_for WHAT SECONDS CMD...: until CMD succeeds; fails with the node's logs otherwise.
wait_for() {
  local what=$1 limit=$2
  shift 2
  eventually "$limit" "$@" || { show_node_logs; fail "$what: not after $limit s"; }
}
jsonpath() { kubectl get "$@" 2>/dev/null; }
# is WANT ARGS...: whether `kubectl get ARGS...` prints WANT (asked again at each call).
is() { local want=$1; shift; [[ $(jsonpath "$@") == "$want" ]]; }
finished() { [[ $(jsonpath -n node-test pod "$1" -o jsonpath='{.status.phase}') =~ ^(Succeeded|Failed)$ ]]; }

# --- 1. the Node ---------------------------------------------------------------------------
[[ $KMODD_NODE_NAME == "$node_name" ]] || fail "the node env names $KMODD_NODE_NAME, want $node_name"
[[ $(jsonpath node "$node_name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]] \
  || { show_node_logs; fail "Node $node_name is not Ready"; }
kubelet_version=$(jsonpath node "$node_name" -o jsonpath='{.status.nodeInfo.kubeletVersion}')
runtime=$(jsonpath node "$node_name" -o jsonpath='{.status.nodeInfo.containerRuntimeVersion}')
[[ $kubelet_version == "$KMODD_KUBE_VERSION" ]] || fail "kubelet $kubelet_version, want $KMODD_KUBE_VERSION"
[[ $runtime == containerd://* ]] || fail "container runtime $runtime, want containerd"
note "Node $node_name Ready: kubelet $kubelet_version, $runtime"

# --- 2. a Pod to Completed -----------------------------------------------------------------
kubectl create namespace node-test >/dev/null || fail "cannot create a namespace"
# The controller-manager makes the namespace's default ServiceAccount; a Pod needs it.
wait_for "the default ServiceAccount in node-test" 60 kubectl -n node-test get serviceaccount default
pod_manifest() {  # pod_manifest NAME SCRIPT [LIMITS_JSON]: a Pod of the local busybox image
  python3 - "$1" "$2" "${3:-{\}}" "$KMODD_NODE_PAUSE_IMAGE" <<'PY'
import json, sys
name, script, limits, image = sys.argv[1:5]
print(json.dumps({"apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": name, "namespace": "node-test"},
  "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": image,
    "imagePullPolicy": "Never", "command": ["/bin/busybox", "sh", "-c", script],
    "resources": {"limits": json.loads(limits)}}]}}))
PY
}
pod_manifest hello 'test -s /var/run/secrets/kubernetes.io/serviceaccount/token && exit 0' \
  | kubectl create -f - >/dev/null || fail "cannot create the Pod hello"
wait_for "Pod hello finished" 120 finished hello
is Succeeded -n node-test pod hello -o jsonpath='{.status.phase}' \
  || { show_node_logs; fail "Pod hello did not succeed: no service-account token in it?"; }
[[ $(jsonpath -n node-test pod hello -o jsonpath='{.spec.nodeName}') == "$node_name" ]] \
  || fail "Pod hello ran on another node"
note "Pod hello: scheduled on $node_name, its token mounted, Completed"

# --- 3. the test device plugin as a DaemonSet ----------------------------------------------
kubectl apply -f - >/dev/null <<EOF || fail "cannot create the DaemonSet"
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: test-device-plugin, namespace: node-test}
spec:
  selector: {matchLabels: {app: test-device-plugin}}
  template:
    metadata: {labels: {app: test-device-plugin}}
    spec:
      automountServiceAccountToken: false
      containers:
      - name: plugin
        image: $KMODD_TEST_DEVICE_PLUGIN_IMAGE
        args: [--resource, widget, --count, "3", --poll-interval-ms, "200"]
        volumeMounts: [{name: device-plugins, mountPath: $dp_dir}]
      volumes:
      - {name: device-plugins, hostPath: {path: $dp_dir, type: Directory}}
EOF
wait_for "the plugin's DaemonSet pod Ready" 180 \
  is 1 -n node-test daemonset test-device-plugin -o jsonpath='{.status.numberReady}'
wait_for "kmodd.test/widget: 3 in the Node's allocatable" 60 \
  is 3 node "$node_name" -o jsonpath='{.status.allocatable.kmodd\.test/widget}'
plugin_socks=("$dp_dir"/kmodd-test-widget-*.sock)
[[ -S $dp_dir/kubelet.sock && -S ${plugin_socks[0]} ]] \
  || fail "the kubelet's or the plugin's socket is not in $dp_dir: $(ls "$dp_dir")"
note "DaemonSet pod Ready (image pulled from $KMODD_REGISTRY); allocatable kmodd.test/widget: 3"

# --- 4. a Pod that uses a device -----------------------------------------------------------
# shellcheck disable=SC2016  # expanded by the Pod's shell
pod_manifest uses-widget 'echo "devices=$KMODD_TEST_DEVICES"; test -n "$KMODD_TEST_DEVICES"' \
  '{"kmodd.test/widget": "1"}' | kubectl create -f - >/dev/null \
  || fail "cannot create the Pod uses-widget"
wait_for "Pod uses-widget finished" 120 finished uses-widget
phase=$(jsonpath -n node-test pod uses-widget -o jsonpath='{.status.phase}')
[[ $phase == Succeeded ]] || { show_node_logs; fail "Pod uses-widget $phase: it did not get KMODD_TEST_DEVICES from Allocate"; }
# The containers' logs, read where the kubelet writes them (podLogsDir under the node's
# directory): `kubectl logs` needs the apiserver to reach the kubelet at a non-loopback address.
grep -rqs 'devices=widget-[0-2]' "$KMODD_NODE_DIR"/kubelet/pods-logs/node-test_uses-widget_* \
  || fail "Pod uses-widget's log has no devices=widget-N"
grep -rqs '"devices allocated"' "$KMODD_NODE_DIR"/kubelet/pods-logs/node-test_test-device-plugin-* \
  || fail "the plugin's log has no allocation"
note "Pod uses-widget got a kmodd.test/widget device and Completed"

# nothing_left WHEN: no process, mount, socket, cgroup, bridge or network namespace of the
# node is left (the env of the node that was stopped is loaded).
nothing_left() {
  for p in "$KMODD_NODE_KUBELET_PID" "$KMODD_NODE_CONTAINERD_PID" "$KMODD_NODE_KCM_PID" "$KMODD_NODE_SCHEDULER_PID"; do
    alive "$p" && fail "$1: pid $p ($(tr '\0' ' ' <"/proc/$p/cmdline" | cut -c1-80)) still runs after stop"
  done
  left=$(grep -l -F "$tmp/kube/node" /proc/[0-9]*/cmdline 2>/dev/null | grep -v "^/proc/$$/" || true)
  for f in $left; do
    p=${f#/proc/}; p=${p%/cmdline}
    [[ $p == "$$" || $p == "$BASHPID" ]] && continue
    alive "$p" && fail "$1: a process still names the node's directory: $p $(tr '\0' ' ' <"$f" | cut -c1-120)"
  done
  # Container processes do not name the directory: the node's cgroups must be gone, and
  # with them every process that was in them.
  for ctl in /sys/fs/cgroup/*/; do
    [[ -d $ctl${KMODD_NODE_CGROUP_ROOT#/} ]] && fail "$1: the cgroup $ctl${KMODD_NODE_CGROUP_ROOT#/} is left"
  done
  mounts=$(awk -v p="$tmp/" 'index($5, p) == 1 {print $5}' /proc/self/mountinfo)
  [[ -z $mounts ]] || fail "$1: mounts left under $tmp: $mounts"
  socks=$(find "$dp_dir" -type s 2>/dev/null)
  [[ -z $socks ]] || fail "$1: sockets left in $dp_dir: $socks"
  socks=$(find "$tmp" -type s 2>/dev/null)
  [[ -z $socks ]] || fail "$1: sockets left under $tmp: $socks"
  [[ $(shim_sockets) == "$shims_before" ]] || fail "$1: containerd shim sockets left in /run/containerd/s: $(comm -13 <(echo "$shims_before") <(shim_sockets))"
  [[ $(netns_now) == "$netns_before" ]] || fail "$1: network namespaces left in /run/netns: $(comm -13 <(echo "$netns_before") <(netns_now))"
  ip link show "$(cat "$KMODD_NODE_DIR/bridge")" >/dev/null 2>&1 && fail "$1: the bridge $(cat "$KMODD_NODE_DIR/bridge") is left"
  compgen -G '/var/log/containers/*node-test*' >/dev/null && fail "$1: links left in /var/log/containers"
}

# --- 5. stop leaves nothing behind ---------------------------------------------------------
t2=$(ms)
"$root/tools/kube/node" stop "$dir" 2>"$tmp/node-stop.err" || { cat "$tmp/node-stop.err"; fail "tools/kube/node stop failed"; }
note "tools/kube/node stop took $(( $(ms) - t2 )) ms"
sed 's/^/# stop: /' "$tmp/node-stop.err"
nothing_left "after stop"
note "after stop: no process, mount, socket, cgroup, bridge or network namespace left"

# --- 6. stop after the API server is gone: the sweep alone ---------------------------------
# A test that fails half-way may stop the harness before the node. No drain then: stop must
# find the containers, network namespaces, mounts and cgroups itself.
"$root/tools/kube/node" start --name "$node_name" "$dir" >"$tmp/node.out" 2>"$tmp/node.err" \
  || { cat "$tmp/node.err"; fail "tools/kube/node start (again) failed"; }
# shellcheck source=/dev/null
. "$dir/node/env"
pod_manifest sleeper '/bin/busybox sleep 3600' | kubectl create -f - >/dev/null || fail "cannot create the Pod sleeper"
wait_for "Pod sleeper Running" 120 is Running -n node-test pod sleeper -o jsonpath='{.status.phase}'
[[ -n $(netns_now) && $(netns_now) != "$netns_before" ]] || fail "the running Pod has no network namespace in /run/netns"
"$root/tools/kube/stop" "$dir" 2>/dev/null || fail "tools/kube/stop failed"
t2=$(ms)
"$root/tools/kube/node" stop "$dir" 2>"$tmp/node-stop.err" || { cat "$tmp/node-stop.err"; fail "tools/kube/node stop (no API server) failed"; }
note "tools/kube/node stop without an API server took $(( $(ms) - t2 )) ms"
nothing_left "after stop without an API server"
note "after stop without an API server: nothing left either"
echo "PASS: kube node"

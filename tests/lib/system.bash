# shellcheck shell=bash
# shellcheck disable=SC2154  # harness_src comes from harness.bash; tmp, K and bin from the caller
# What the two whole-system tests (tests/system/system_test.sh, kube_system_test.sh) share:
# the demo driver's images, the director that steps the guest, the guest's side of it, and
# reading the guest's sections. Sourced after harness.bash and vm.bash; uses the caller's
# show FILE and tmp.

# push_demo_images REGISTRY_DIR: the demo driver (the rig's test modules and firmware, KMM
# layout) pushed to the registry as kmodd/kmm-ci:v1-$K, and as v2-$K with another BUILD-ID;
# their digests in digest_v1 and digest_v2.
push_demo_images() {
  local tag digest layers
  mkdir -p "$tmp/v2/opt/lib/modules/$K"
  echo "v2" >"$tmp/v2/opt/lib/modules/$K/BUILD-ID"
  for tag in v1 v2; do
    layers=(--layer "$KMODD_TEST_IMAGE")
    [[ $tag == v2 ]] && layers+=(--layer "$tmp/v2")
    "$harness_src/tools/registry/push-image" "$1" "kmodd/kmm-ci:$tag-$K" "${layers[@]}" \
      >"$tmp/push-$tag.out" 2>&1 || { show "$tmp/push-$tag.out"; fail "cannot push image $tag"; }
    digest=$(sed -n 's/^KMODD_IMAGE_DIGEST=//p' "$tmp/push-$tag.out")
    [[ -n $digest ]] || { show "$tmp/push-$tag.out"; fail "no digest for image $tag"; }
    printf -v "digest_$tag" '%s' "$digest"
  done
}

# The guest's VM (vm_pid, its stderr in vm_err) must stay up while the host waits for it.
eventually_guard() {
  [[ -z ${vm_pid:-} ]] || kill -0 "$vm_pid" 2>/dev/null \
    || { show "${vm_err:-/dev/null}"; fail "the VM stopped while the host waited for it"; }
}

# --- the director: the step the guest should take next ----------------------------------
# The host drives; the guest follows. The guest reads the current step from a small HTTP
# server on the host (python3 -m http.server, at 10.0.2.2 from the guest) and says it is
# done with a step by asking for /ack/STEP, which the host finds in that server's log.
director_start() {  # director_start DIR: serves DIR (log DIR.log) on dir_port
  director_dir=$1
  mkdir -p "$director_dir/ack"
  echo start >"$director_dir/step"
  dir_port=$(free_port)
  python3 -m http.server "$dir_port" --bind 127.0.0.1 --directory "$director_dir" \
    >"$director_dir.log" 2>&1 &
  pids+=($!)
}
step() { echo "$1" >"$director_dir/step.new" && mv "$director_dir/step.new" "$director_dir/step"; }
wait_ack() {  # wait_ack STEP SECONDS
  eventually "$2" grep -q "GET /ack/$1 " "$director_dir.log" \
    || fail "the guest did not finish step $1 within $2 s"
}

# director_guest_lib FILE: the guest's side (busybox sh), for its scripts to source:
# wait_step STEP, ack STEP, section NAME (what follows is that section of its output), and
# stop_agent (SIGTERM to the agent started with its pid in /run/agent.pid, and wait).
director_guest_lib() {
  echo "director=http://10.0.2.2:$dir_port" >"$1"
  cat >>"$1" <<'EOF'
current() { wget -q -O - "$director/step" 2>/dev/null; }
wait_step() {  # wait_step STEP: until the host says so (5 minutes at most)
  i=0
  while [ "$(current)" != "$1" ]; do
    i=$((i + 1)); [ $i -lt 3000 ] || { echo "timeout waiting for step $1"; return 1; }
    usleep 100000
  done
}
ack() { wget -q -O /dev/null "$director/ack/$1" 2>/dev/null; true; }
section() { echo "=== $1"; }
stop_agent() {  # SIGTERM, and wait: the state disk is unmounted after the script
  kill "$(cat /run/agent.pid)"
  i=0; while kill -0 "$(cat /run/agent.pid)" 2>/dev/null && [ $i -lt 100 ]; do usleep 100000; i=$((i + 1)); done
}
EOF
}

sec() {  # sec FILE NAME: the lines of section NAME in the guest's output FILE
  awk -v s="=== $2" '$0 == s {on = 1; next} /^=== / {on = 0} on' "$1"
}

# --- the Kubernetes-mode guest (kube_system_test.sh, kube_node_plugin_test.sh) -------------
# kube_guest_controller NAMESPACE [PORT LOG]: kmodd-controller in Kubernetes mode on the host
# (admin kubeconfig, debug log in LOG, default $tmp/controller.log, a serving certificate for
# 10.0.2.2, how the guest reaches the host), on PORT (default: a free one) in ctl_port, its
# pid in ctl_pid (and pids); waits for its CA and puts it in $tmp/guest/etc.
kube_guest_controller() {
  ctl_port=${2:-$(free_port)}
  "$bin/kmodd-controller" run --kubernetes --kubeconfig "$KMODD_KUBE_KUBECONFIG" --namespace "$1" \
    --listen "127.0.0.1:$ctl_port" --cert-ip 10.0.2.2 --cert-ip 127.0.0.1 \
    --log-level debug >"${3:-$tmp/controller.log}" 2>&1 &
  ctl_pid=$!
  pids+=("$ctl_pid")
  eventually 30 kube_admin -n "$1" get configmap kmodd-ca || fail "the controller published no CA"
  mkdir -p "$tmp/guest/etc"
  kube_admin -n "$1" get configmap kmodd-ca -o jsonpath='{.data.ca\.crt}' >"$tmp/guest/etc/ca.crt"
}

# kube_guest_agent NODE CTL_PORT [ARG...]: $tmp/guest/agent.sh, which starts the real agent
# in the guest as NODE against the controller at 10.0.2.2:CTL_PORT, with the CA and token
# the host put in $tmp/guest/etc (the guest's /etc/kmodd), its pid in /run/agent.pid.
kube_guest_agent() {
  local node=$1 port=$2
  shift 2
  cat >"$tmp/guest/agent.sh" <<EOF
mkdir -p /var/lib/kmodd
/usr/bin/kmodd-agent run --node-name $node --controller 10.0.2.2:$port \\
  --ca /etc/kmodd/ca.crt --token-file /etc/kmodd/token \\
  --state-dir /var/lib/kmodd --firmware-dir /var/lib/kmodd/firmware --firmware-class-path \\
  $* >>/run/kmodd-agent.log 2>&1 &
echo \$! >/run/agent.pid
EOF
}

# kube_guest_boot TIMEOUT: boots the guest on its network with the agent and agentctl (from
# $tmp/bin), $tmp/guest as /kmodd-test and its etc as /etc/kmodd, a state disk, running
# /kmodd-test/boot1.sh; its output in $tmp/vm1.out (stderr vm1.err), kernel log $tmp/dmesg1.
# Sets vm_pid and vm_err (eventually_guard) and adds the pid to pids.
kube_guest_boot() {
  "$harness_src/tools/vm/run" --net --state "$tmp/state.img" --timeout "$1" --mem 768M \
    --bin "$tmp/bin/kmodd-agent:/usr/bin/kmodd-agent" --bin "$tmp/bin/agentctl:/usr/bin/agentctl" \
    --tree "$tmp/guest:/kmodd-test" --tree "$tmp/guest/etc:/etc/kmodd" \
    --dmesg "$tmp/dmesg1" -- sh /kmodd-test/boot1.sh >"$tmp/vm1.out" 2>"$tmp/vm1.err" &
  vm_pid=$!
  vm_err=$tmp/vm1.err
  pids+=("$vm_pid")
}

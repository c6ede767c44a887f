# shellcheck shell=bash
# tools/kube/node start: sourced by tools/kube/node (its variables and helpers are in scope).

# The sandbox ("pause") image: busybox sleeping, FROM scratch, built with buildah once per
# machine (registry.k8s.io/pause is out of reach) and kept as a docker-archive that ctr
# imports into containerd's k8s.io namespace. Prints the archive's path.
pause_image=kmodd.local/pause:1
ensure_pause_image() {
  local cache=${KMODD_KUBE_CACHE:-/var/cache/kmodd-kube} busybox=/bin/busybox key tar work
  [[ -x $busybox ]] || die "$busybox not found: install busybox-static (tools/bootstrap)"
  command -v buildah >/dev/null || die "buildah not found (tools/bootstrap)"
  key=$(cat "$busybox" "$here/pause/Containerfile" | sha256sum | cut -c1-16)
  tar=$cache/images/pause-$key.tar
  if [[ ! -f $tar ]]; then
    mkdir -p "$cache/images"
    (
      flock 7
      [[ -f $tar ]] && exit 0
      work=$(mktemp -d "${TMPDIR:-/tmp}/kmodd-pause.XXXXXX")
      storage=(--storage-driver vfs --root "$work/storage" --runroot "$work/runroot")
      trap 'buildah "${storage[@]}" rm --all >/dev/null 2>&1; rm -rf "$work"' EXIT
      mkdir -p "$work/ctx/rootfs/bin"
      cp "$busybox" "$work/ctx/rootfs/bin/busybox"
      cp "$here/pause/Containerfile" "$work/ctx/Containerfile"
      buildah "${storage[@]}" build --isolation chroot --timestamp 0 --layers=false \
        -f "$work/ctx/Containerfile" -t "$pause_image" "$work/ctx" >"$work/build.log" 2>&1 \
        && buildah "${storage[@]}" push "$pause_image" "docker-archive:$tar.tmp:$pause_image" \
             >>"$work/build.log" 2>&1 \
        || { tail -n 20 "$work/build.log" >&2; exit 1; }
      mv -f "$tar.tmp" "$tar"
    ) 7>"$cache/images/.lock" || die "could not build the pause image with buildah"
    log "pause image built ($tar)"
  fi
  echo "$tar"
}

find_binaries() {
  local bin=${KMODD_KUBE_BIN:-} cache pin_k8s pin_etcd b
  if [[ -z $bin ]]; then
    cache=${KMODD_KUBE_CACHE:-/var/cache/kmodd-kube}
    pin_k8s=$(sed -n 's|^[[:space:]]*k8s\.io/kubernetes \(v[^[:space:]]*\).*|\1|p' "$here/build/go.mod" | head -n1)
    pin_etcd=$(sed -n 's|^[[:space:]]*go\.etcd\.io/etcd/server/v3 \(v[^[:space:]]*\).*|\1|p' "$here/build/go.mod" | head -n1)
    bin=$cache/k8s-$pin_k8s-etcd-$pin_etcd/bin
  fi
  kubelet=$bin/kubelet
  kcm=$bin/kube-controller-manager
  scheduler=$bin/kube-scheduler
  kubectl=$bin/kubectl
  for b in "$kubelet" "$kcm" "$scheduler" "$kubectl"; do
    [[ -x $b ]] || die "$b not found: run tools/kube/setup (it builds the node's binaries once per machine)"
  done
  for b in containerd containerd-shim-runc-v2 runc ctr ip openssl curl python3 flock; do
    command -v "$b" >/dev/null || die "$b not found: run tools/bootstrap (containerd, runc, iproute2, ...)"
  done
  for b in bridge host-local loopback; do
    [[ -x /usr/lib/cni/$b ]] || die "/usr/lib/cni/$b not found: install containernetworking-plugins (tools/bootstrap)"
  done
}

sign_client_cert() {  # sign_client_cert NAME CN ORG: DIR/node/pki/NAME.{crt,key} from the harness CA
  local out=$node/pki/$1
  (
    umask 077
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$out.key" \
      -out "$out.csr" -subj "/O=$3/CN=$2" 2>>"$node/pki/openssl.log"
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' >"$out.ext"
    openssl x509 -req -in "$out.csr" -CA "$dir/pki/ca.crt" -CAkey "$dir/pki/ca.key" \
      -CAcreateserial -days 3650 -extfile "$out.ext" -out "$out.crt" 2>>"$node/pki/openssl.log"
  ) || { cat "$node/pki/openssl.log" >&2; fail_start "could not sign the $1 certificate"; }
}

write_kubeconfig() {  # write_kubeconfig FILE CERT_NAME
  (
    umask 077
    cat >"$1.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kmodd-test
  cluster:
    server: $KMODD_KUBE_URL
    certificate-authority: $dir/pki/ca.crt
users:
- name: $2
  user:
    client-certificate: $node/pki/$2.crt
    client-key: $node/pki/$2.key
contexts:
- name: kmodd-test
  context: {cluster: kmodd-test, user: $2}
current-context: kmodd-test
EOF
  )
  mv -f "$1.tmp" "$1"
}

write_containerd_config() {
  local c=$node/containerd
  mkdir -p "$c/root" "$c/state" "$c/certs.d"
  cat >"$c/config.toml" <<EOF
# containerd for the harness's kubelet (tools/kube/node). All state under DIR/node.
version = 2
root = "$c/root"
state = "$c/state"
[grpc]
  address = "$c/containerd.sock"
[ttrpc]
  address = "$c/containerd.sock.ttrpc"
[debug]
  level = "info"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  # This machine forbids lowering oom_score_adj: without this every sandbox fails with
  # runc's "can't get final child's PID from pipe".
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$node/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$c/certs.d"
EOF
}

# Pod IPs from a bridge of our own: named for this DIR (two harnesses never share one), no
# gateway address on the host and no masquerade (no route or iptables rule to leave
# behind); host-local keeps its leases under DIR/node.
write_cni_config() {
  mkdir -p "$node/cni/net.d" "$node/cni/ipam"
  cat >"$node/cni/net.d/10-kmodd.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "kmodd-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": false,
      "ipMasq": false,
      "hairpinMode": false,
      "ipam": {
        "type": "host-local",
        "dataDir": "$node/cni/ipam",
        "ranges": [[{"subnet": "10.244.0.0/24"}]]
      }
    },
    {"type": "loopback"}
  ]
}
EOF
}

write_kubelet_config() {
  local k=$node/kubelet
  mkdir -p "$k/root" "$k/pods-logs" "$k/serving"
  cat >"$k/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$node/containerd/containerd.sock
# cgroupfs: no systemd here. The machine has cgroup v1, which v1.34 refuses by default.
cgroupDriver: cgroupfs
failCgroupV1: false
cgroupRoot: /$cgroup_root
failSwapOn: false
address: 127.0.0.1
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $kubelet_healthz_port
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: Webhook}
podLogsDir: $k/pods-logs
staticPodPath: ""
clusterDomain: cluster.local
registerNode: true
# A shared test machine's disk is often fuller than a node's would be: evict only near full.
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
# Status comes sooner than the production defaults: tests wait for it.
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
EOF
}

wait_healthz() {  # wait_healthz NAME PID URL: until URL says ok, or the process dies
  local t0=$SECONDS
  while ((SECONDS - t0 < start_timeout)); do
    alive "$2" || { log "$1 exited; the end of its log:"; tail -n 25 "$node/$1.log" >&2; return 1; }
    [[ $(curl -sk --max-time 2 "$3" 2>/dev/null) == ok ]] && return 0
    sleep 0.2
  done
  log "$1 not healthy after ${start_timeout} s; the end of its log:"
  tail -n 25 "$node/$1.log" >&2
  return 1
}

# Undoes a half-made node. The lock goes first: stop's machine sweep takes it anew.
fail_start() {
  exec 8>&-
  stop_node
  die "$1"
}

start_node() {
  local t0 t_cd t_cp t_end pause_tar p
  t0=$(ms)
  [[ -f $dir/env ]] || die "no running harness in $dir: run tools/kube/start $dir first"
  # shellcheck source=/dev/null
  source "$dir/env"
  find_binaries
  [[ $(id -u) -eq 0 ]] || die "the kubelet and containerd need root"
  for p in kubelet containerd kcm scheduler; do
    [[ -f $node/$p.pid ]] && ours "$(cat "$node/$p.pid")" \
      && die "a node from $dir is already running; stop it first (tools/kube/node stop $dir)"
  done
  pause_tar=$(ensure_pause_image)

  # The machine-wide lock, held by the kubelet from here on (fd 8 is inherited by it only).
  mkdir -p "$(dirname "$lock_file")" "$node/pki"
  exec 8>"$lock_file"
  if ! flock -n 8; then
    log "another kubelet node runs on this machine (lock $lock_file); waiting up to ${lock_timeout} s"
    flock -w "$lock_timeout" 8 || die "the node lock $lock_file is still held after ${lock_timeout} s: a node of another test or a leftover (see its holder with: fuser -v $lock_file)"
  fi
  # What the kubelet creates outside DIR, recorded so that stop removes only that.
  : >"$node/created"
  [[ -d /var/lib/kubelet ]] || echo /var/lib/kubelet >>"$node/created"
  [[ -d $dp_dir ]] || echo "$dp_dir" >>"$node/created"
  for d in "${dra_dirs[@]}"; do
    [[ -d $d ]] || { echo "$d" >>"$node/created"; mkdir -p "$d"; }
  done
  [[ -d /var/log/containers ]] || echo /var/log/containers >>"$node/created"
  [[ -d /var/log/pods ]] || echo /var/log/pods >>"$node/created"
  # A kubelet.sock there now is a leftover (we hold the lock): the kubelet replaces it.
  echo "$name" >"$node/name"

  bridge=kmodd$(printf '%s' "$dir" | sha256sum | cut -c1-8)
  cgroup_root=kmodd-node-$(printf '%s' "$dir" | sha256sum | cut -c1-12)
  echo "$bridge" >"$node/bridge"
  echo "$cgroup_root" >"$node/cgroup-root"
  # The kubelet wants its cgroup root to exist in every hierarchy.
  for p in $(cgroup_controllers); do mkdir -p "$p/$cgroup_root"; done

  # --- containerd ---
  write_containerd_config
  for p in "${registries[@]}"; do write_registry_hosts "$p"; done
  write_cni_config
  spawn containerd "$node/containerd.log" containerd --config "$node/containerd/config.toml"
  for _ in $(seq 300); do
    [[ -S $node/containerd/containerd.sock ]] \
      && ctr -a "$node/containerd/containerd.sock" version >/dev/null 2>&1 && break
    alive "$(cat "$node/containerd.pid")" || { tail -n 25 "$node/containerd.log" >&2; fail_start "containerd exited"; }
    sleep 0.1
  done
  ctr -a "$node/containerd/containerd.sock" -n k8s.io images import "$pause_tar" >"$node/import.log" 2>&1 \
    || { cat "$node/import.log" >&2; fail_start "ctr could not import the pause image"; }
  t_cd=$(ms)

  # --- kube-controller-manager and kube-scheduler (the admin kubeconfig of the harness) ---
  local kcm_port sched_port
  read -r kcm_port sched_port kubelet_port kubelet_healthz_port <<<"$(free_ports 4)"
  spawn kcm "$node/kcm.log" "$kcm" --kubeconfig "$dir/kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$kcm_port" --cert-dir "$node/kcm-serving" \
    --leader-elect=false --use-service-account-credentials=false \
    --service-account-private-key-file "$dir/pki/sa.key" --root-ca-file "$dir/pki/ca.crt" \
    --cluster-signing-cert-file "$dir/pki/ca.crt" --cluster-signing-key-file "$dir/pki/ca.key" \
    --node-monitor-grace-period 40s --profiling=false
  spawn scheduler "$node/scheduler.log" "$scheduler" --kubeconfig "$dir/kubeconfig" \
    --authentication-kubeconfig "$dir/kubeconfig" --authorization-kubeconfig "$dir/kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$sched_port" --cert-dir "$node/scheduler-serving" \
    --leader-elect=false --profiling=false
  wait_healthz kcm "$(cat "$node/kcm.pid")" "https://127.0.0.1:$kcm_port/healthz" \
    || fail_start "kube-controller-manager did not start"
  wait_healthz scheduler "$(cat "$node/scheduler.pid")" "https://127.0.0.1:$sched_port/healthz" \
    || fail_start "kube-scheduler did not start"
  t_cp=$(ms)

  # --- the kubelet, as system:node:NAME (the Node authorizer's rule) ---
  sign_client_cert kubelet "system:node:$name" system:nodes
  mkdir -p "$node/kubelet"
  write_kubeconfig "$node/kubelet/kubeconfig" kubelet
  write_kubelet_config
  # fd 8 (the lock) stays open in the kubelet only.
  setsid "$kubelet" --config "$node/kubelet/config.yaml" --kubeconfig "$node/kubelet/kubeconfig" \
    --root-dir "$node/kubelet/root" --cert-dir "$node/kubelet/serving" \
    --hostname-override "$name" --node-ip 127.0.0.1 --v 2 \
    </dev/null >>"$node/kubelet.log" 2>&1 &
  echo $! >"$node/kubelet.pid"
  exec 8>&-

  local ready="" t1=$SECONDS
  while ((SECONDS - t1 < start_timeout)); do
    alive "$(cat "$node/kubelet.pid")" || { tail -n 30 "$node/kubelet.log" >&2; fail_start "the kubelet exited"; }
    ready=$(kubectl_ get node "$name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) || ready=""
    [[ $ready == True ]] && break
    sleep 0.5
  done
  if [[ $ready != True ]]; then
    log "Node $name not Ready after ${start_timeout} s (Ready=$ready); the end of $node/kubelet.log:"
    grep -E '^E|rror' "$node/kubelet.log" | tail -n 25 >&2
    fail_start "the node did not become Ready"
  fi
  t_end=$(ms)
  log "Node $name Ready in $((t_end - t0)) ms (containerd $((t_cd - t0)) ms, controller-manager and scheduler $((t_cp - t_cd)) ms, kubelet to Ready $((t_end - t_cp)) ms)"

  {
    printf 'KMODD_NODE_NAME=%q\n' "$name"
    printf 'KMODD_NODE_DIR=%q\n' "$node"
    printf 'KMODD_NODE_CONTAINERD_SOCK=%q\n' "$node/containerd/containerd.sock"
    printf 'KMODD_NODE_PAUSE_IMAGE=%q\n' "$pause_image"
    printf 'KMODD_NODE_CGROUP_ROOT=%q\n' "/$cgroup_root"
    printf 'KMODD_NODE_DEVICE_PLUGIN_DIR=%q\n' "$dp_dir"
    for p in kubelet containerd kcm scheduler; do
      printf 'KMODD_NODE_%s_PID=%q\n' "${p^^}" "$(cat "$node/$p.pid")"
      printf 'KMODD_NODE_%s_LOG=%q\n' "${p^^}" "$node/$p.log"
    done
  } >"$node/env.tmp"
  mv -f "$node/env.tmp" "$node/env"
  cat "$node/env"
}

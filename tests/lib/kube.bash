# shellcheck shell=bash
# shellcheck disable=SC2154  # harness_src comes from harness.bash
# Objects the Kubernetes-mode tests make in the harness's API server (kube_start in
# harness.bash), as the admin (KMODD_KUBE_KUBECONFIG), and what they read back from it.
# Sourced after harness.bash.

kube_admin() { kubectl --kubeconfig "$KMODD_KUBE_KUBECONFIG" "$@"; }

# kube_crd_install: the Module, ModulePolicy and PreflightValidation CRDs of deploy/crd, Established.
kube_crd_install() {
  kube_admin apply -f "$harness_src/deploy/crd/kmm.sigs.x-k8s.io_modules.yaml" \
    -f "$harness_src/deploy/crd/kmodd.io_modulepolicies.yaml" \
    -f "$harness_src/deploy/crd/kmm.sigs.x-k8s.io_preflightvalidations.yaml" >/dev/null \
    || fail "cannot apply the CRDs"
  # Not `kubectl wait`: it fails at once if it reads the CRD before its first condition.
  KUBECONFIG=$KMODD_KUBE_KUBECONFIG "$harness_src/tools/kube/wait-crd" modules.kmm.sigs.x-k8s.io \
    || fail "the Module CRD is not Established"
  KUBECONFIG=$KMODD_KUBE_KUBECONFIG "$harness_src/tools/kube/wait-crd" modulepolicies.kmodd.io \
    || fail "the ModulePolicy CRD is not Established"
  KUBECONFIG=$KMODD_KUBE_KUBECONFIG "$harness_src/tools/kube/wait-crd" preflightvalidations.kmm.sigs.x-k8s.io \
    || fail "the PreflightValidation CRD is not Established"
}

# kube_node_info NODE KERNEL BOOT_ID OS_IMAGE: the status.nodeInfo a kubelet would report
# (there is none: the Node objects are made by the test).
kube_node_info() {
  kube_admin patch node "$1" --subresource=status --type=merge -p \
    "{\"status\":{\"nodeInfo\":{\"kernelVersion\":\"$2\",\"bootID\":\"$3\",\"architecture\":\"amd64\",\"machineID\":\"m\",\"systemUUID\":\"u\",\"kubeProxyVersion\":\"\",\"kubeletVersion\":\"\",\"containerRuntimeVersion\":\"\",\"operatingSystem\":\"linux\",\"osImage\":\"$4\"}}}" >/dev/null \
    || fail "cannot set Node $1's status"
}

# kube_agent_token NODE NAMESPACE FILE: an agent's credential as the DaemonSet's projected
# token: service account kmodd-agent (which must exist), audience kmodd, bound to a Pod
# kmodd-agent-NODE (never run: no kubelet) on NODE, written to FILE.
kube_agent_token() {
  kube_admin create -f - >/dev/null <<YAML || fail "cannot create Pod kmodd-agent-$1"
apiVersion: v1
kind: Pod
metadata: {name: kmodd-agent-$1, namespace: $2}
spec:
  serviceAccountName: kmodd-agent
  automountServiceAccountToken: false
  nodeName: $1
  containers: [{name: agent, image: kmodd/agent}]
YAML
  kube_admin -n "$2" create token kmodd-agent --audience kmodd --duration 1h --bound-object-kind Pod \
    --bound-object-name "kmodd-agent-$1" >"$3" || fail "no token for $1"
}

# A Module in kmm-demo as KMM reports it: status.moduleLoader as "matching/desired/available",
# and the Nodes labelled ready for it.
loader() {  # loader MODULE
  kube_admin get module -n kmm-demo "$1" -o jsonpath='{.status.moduleLoader.nodesMatchingSelectorNumber}/{.status.moduleLoader.desiredNumber}/{.status.moduleLoader.availableNumber}'
}
ready_nodes() {  # ready_nodes MODULE: their names, space-separated
  kube_admin get nodes -l "kmm.node.kubernetes.io/kmm-demo.$1.ready" -o jsonpath='{.items[*].metadata.name}'
}
status_is() { [[ $(loader "$1") == "$2" ]]; }  # status_is MODULE M/D/A
ready_is() { [[ $(ready_nodes "$1") == "$2" ]]; }  # ready_is MODULE "NODE NODE..."

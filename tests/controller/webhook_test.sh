#!/usr/bin/env bash
# The admission webhook, the self-managed certificates and the agents' token check against
# a real kube-apiserver (tools/kube): the controller in Kubernetes mode makes its CA and a
# serving certificate for 127.0.0.1, publishes the CA; the API server calls the webhook
# through a ValidatingWebhookConfiguration (clientConfig.url + caBundle) and refuses an
# invalid Module naming the field; the CRD refuses what `validate` refuses (the Modules of
# tests/api/data/crd_cases.yaml), at the same field paths; Modules are still
# admitted and refused while another client floods the webhook with 3 MiB reviews; an
# agent with a projected token bound to a pod on node-a is served as node-a and refused
# (PERMISSION_DENIED) as node-b. Fails, never skips, without the harness.
#
# usage: webhook_test.sh BIN_DIR SOURCE_DIR
set -euo pipefail

bin=$1
src=$2
fail() {
  echo "webhook_test: FAIL: $*" >&2
  for f in "$dir"/*.log; do echo "--- $f" >&2; tail -n 30 "$f" >&2; done
  exit 1
}
note() { echo "webhook_test: ok: $*"; }
# shellcheck source=tests/lib/harness.bash
source "$src/tests/lib/harness.bash"
# shellcheck source=tests/lib/kube.bash
source "$src/tests/lib/kube.bash"
declare dir
make_temp_dir dir kmodd-webhook-test

kube_start "$dir/kube"
export KUBECONFIG=$KMODD_KUBE_KUBECONFIG
ns=kmodd-system

kube_crd_install
kubectl create namespace "$ns" >/dev/null
kubectl create namespace kmm-demo >/dev/null
kubectl -n "$ns" create serviceaccount kmodd-agent >/dev/null
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {role: worker}}
---
apiVersion: v1
kind: Node
metadata: {name: node-b, labels: {role: worker}}
---
apiVersion: v1
kind: Pod
metadata: {name: kmodd-agent-a, namespace: $ns}
spec:
  serviceAccountName: kmodd-agent
  automountServiceAccountToken: false
  nodeName: node-a
  containers: [{name: agent, image: kmodd/agent}]
YAML

sync_port=$(free_port)
hook_port=$(free_port)
"$bin/kmodd-controller" run --kubernetes --kubeconfig "$KUBECONFIG" --namespace "$ns" \
  --listen "127.0.0.1:$sync_port" --webhook-listen "127.0.0.1:$hook_port" \
  --cert-ip 127.0.0.1 --status-file "$dir/status.yaml" >"$dir/controller.log" 2>&1 &
pids+=($!)
eventually 30 kubectl -n "$ns" get configmap kmodd-ca || fail "the controller published no CA"
kubectl -n "$ns" get configmap kmodd-ca -o jsonpath='{.data.ca\.crt}' >"$dir/ca.crt"
kubectl -n "$ns" get secret kmodd-controller-tls -o jsonpath='{.data.tls\.crt}' | base64 -d \
  | openssl x509 -noout -ext subjectAltName | grep -q 'IP Address:127.0.0.1' \
  || fail "the serving certificate lacks IP:127.0.0.1"
grep -q 'kmodd-webhook.kmodd-system.svc' <(kubectl -n "$ns" get secret kmodd-controller-tls \
  -o jsonpath='{.data.tls\.crt}' | base64 -d | openssl x509 -noout -ext subjectAltName) \
  || fail "the serving certificate lacks the webhook Service's name"
note "CA and serving certificate in Secret kmodd-controller-tls, CA in ConfigMap kmodd-ca"

kubectl apply -f - >/dev/null <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: kmodd-module-validation}
webhooks:
  - name: modules.kmm.sigs.x-k8s.io.kmodd.io
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Fail
    timeoutSeconds: 10
    clientConfig:
      url: https://127.0.0.1:$hook_port/validate-module
      caBundle: $(base64 -w0 <"$dir/ca.crt")
    rules:
      - {apiGroups: [kmm.sigs.x-k8s.io], apiVersions: [v1beta1], operations: [CREATE, UPDATE], resources: [modules], scope: Namespaced}
YAML

module() {  # module NAME MAPPINGS
  cat <<YAML
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: $1, namespace: kmm-demo}
spec:
  selector: {role: worker}
  moduleLoader:
    container:
      modprobe: {moduleName: m}
      kernelMappings: $2
YAML
}
# The webhook configuration takes a moment to reach the API server's admission chain.
eventually 20 bash -c "! kubectl apply -f - <<<'$(module probe '[{regexp: "(", containerImage: r/x:1}]')' 2>/dev/null" \
  || fail "an invalid Module was accepted: the webhook is not called"
if out=$(module bad '[{regexp: "^(6\\.1", containerImage: "r/x:1"}, {containerImage: "r/x:1"}]' \
         | kubectl apply -f - 2>&1); then
  fail "an invalid Module was accepted"
fi
grep -q 'denied the request' <<<"$out" || fail "not refused by the webhook: $out"
grep -q 'spec.moduleLoader.container.kernelMappings\[0\].regexp: ' <<<"$out" \
  || fail "the refusal does not name kernelMappings[0].regexp: $out"
grep -q 'spec.moduleLoader.container.kernelMappings\[1\]: sets neither regexp nor literal' <<<"$out" \
  || fail "the refusal does not name kernelMappings[1]: $out"
note "invalid Module refused by the API server: $out"
module good '[{regexp: "^.+$", containerImage: "r/x:1"}]' | kubectl apply -f - >/dev/null \
  || fail "a valid Module was refused"
note "valid Module accepted"

# Another client floods the webhook with 3 MiB reviews (8 connections from 127.0.0.2, each
# review some 3 s of CPU: tools/bench/webhook_flood.cc). The API server's reviews go on
# meanwhile: it gives up on a webhook after timeoutSeconds (10 s above), and then, with
# failurePolicy Fail, refuses the Module, so each apply below passes only if the webhook
# answered it in time, beside the flood.
"$bin/webhook_flood" load "$hook_port" --flood 8 --body mappings --seconds 25 \
  >"$dir/flood.log" 2>&1 &
flood=$!
pids+=("$flood")
sleep 5  # every flood connection has a review in the server by now
for i in 1 2 3; do
  module "flooded-$i" '[{regexp: "^.+$", containerImage: "r/x:1"}]' | kubectl apply -f - \
    >"$dir/apply.out" 2>&1 || fail "a valid Module was refused during the flood: $(cat "$dir/apply.out")"
done
if out=$(module flooded-bad '[{containerImage: "r/x:1"}]' | kubectl apply -f - 2>&1); then
  fail "an invalid Module was accepted during the flood"
fi
grep -q 'kernelMappings\[0\]: sets neither regexp nor literal' <<<"$out" \
  || fail "not refused by the webhook during the flood: $out"
wait "$flood" || true
grep -q 'flood_answers={.*200:' "$dir/flood.log" \
  || fail "the flood's reviews were not being answered: $(cat "$dir/flood.log")"
note "Modules admitted and refused while another client sent 3 MiB reviews"

# The CRD's rules (api/crd_rules.yaml) as the API server applies them: every
# Module of crd_cases.yaml is refused at the field paths its annotation lists, the same
# paths `kmodd-controller validate` names; the others pass the CRD and the webhook.
cases=$src/tests/api/data/crd_cases.yaml
"$bin/kmodd-controller" validate -f "$cases" >"$dir/validate.out" 2>"$dir/validate.err" && \
  fail "validate accepted every Module of $cases"
KMODD_KUBE_URL=$KMODD_KUBE_URL KMODD_KUBE_CA=$KMODD_KUBE_CA KMODD_KUBE_TOKEN=$KMODD_KUBE_TOKEN \
  python3 "$src/tests/controller/crd_refusals.py" "$cases" "$dir/validate.err" \
  || fail "the API server and validate judge the Modules of crd_cases.yaml differently"
note "the API server with deploy/crd refuses the Modules validate refuses, at the same paths"

kubectl -n "$ns" create token kmodd-agent --audience kmodd --bound-object-kind Pod \
  --bound-object-name kmodd-agent-a >"$dir/token"
agent() {  # agent NODE: an agent that shows the token of the pod on node-a
  mkdir -p "$dir/$1"
  "$bin/kmodd-agent" run --node-name "$1" --controller "127.0.0.1:$sync_port" \
    --ca "$dir/ca.crt" --token-file "$dir/token" --state-dir "$dir/$1" \
    --cache "$dir/$1/images" --firmware-dir "$dir/$1/firmware" --socket "$dir/$1/agent.sock" \
    --metrics "" >"$dir/agent-$1.log" 2>&1 &
  pids+=($!)
}
agent node-a
eventually 30 grep -q 'connected to the controller' "$dir/agent-node-a.log" \
  || fail "the agent with its own node's token was not served"
note "agent on node-a, token bound to node-a: served"
agent node-b
eventually 30 grep -q 'PERMISSION_DENIED' "$dir/controller.log" \
  || fail "the agent claiming node-b with node-a's token was not refused"
grep 'agent stream refused' "$dir/controller.log" | grep -q 'node-b' \
  || fail "the refusal does not name node-b"
! grep -q 'connected to the controller' "$dir/agent-node-b.log" \
  || fail "the agent claiming node-b was served"
note "agent claiming node-b with node-a's token: PERMISSION_DENIED"
echo "webhook_test: PASS"

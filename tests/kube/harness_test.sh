#!/usr/bin/env bash
# The Kubernetes test harness itself (tools/kube/start): a real etcd and kube-apiserver on
# 127.0.0.1, checked with curl on the paths kmodd's controller depends on.
#
# usage: harness_test.sh REPO_ROOT        (ctest -L kube)
#
#   1. /readyz is ok over TLS verified against the harness CA; /version is the pinned release
#   2. the admin token creates a CustomResourceDefinition; it becomes Established and serves
#      a custom resource
#   3. RBAC: the low-privilege token gets 403 listing secrets, a bad token 401; after a Role
#      and RoleBinding it may list configmaps in that namespace and still not secrets
#   4. TokenRequest for a service account with audience "kmodd", bound to a Node object;
#      TokenReview with audience "kmodd" authenticates it as that service account with the
#      node's name; without the audience it does not; after the Node is deleted it does not
#   5. kube-apiserver restart (etcd stays): the objects are still there
#   6. stop: both processes are gone
#
# Needs the binaries from tools/kube/setup (tools/test runs it). Without them the test FAILS,
# it never skips. KMODD_KUBE_KEEP=1 keeps the harness directory (logs, etcd data) for a look.
set -uo pipefail
root=$1
fail() { echo "FAIL: kube harness: $*"; exit 1; }
note() { echo "# $*"; }
show() { echo "--- $1:"; cat "$1" 2>/dev/null; echo; echo "---"; }
ms() { date +%s%3N; }
# shellcheck source=tests/lib/harness.bash
. "$root/tests/lib/harness.bash"
declare tmp
make_temp_dir tmp kmodd-kube KMODD_KUBE_KEEP
dir=$tmp/kube
# Started below by hand, not with kube_start: this test times the start and checks its env.
on_exit quietly "$root/tools/kube/stop" "$dir"

require_tools curl openssl python3
# The interpreter itself, not a version manager's shim that costs 0.2 s a call.
py=$(python3 -c 'import sys; print(sys.executable)') || fail "python3 does not run"

# api METHOD PATH TOKEN [JSON]: the response body in $tmp/body; prints the HTTP status.
api() {
  local args=(-sS -o "$tmp/body" -w '%{http_code}' --max-time 10 --cacert "$KMODD_KUBE_CA"
              -X "$1" -H "Authorization: Bearer $3" -H 'Accept: application/json')
  [[ $# -ge 4 ]] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
  curl "${args[@]}" "$KMODD_KUBE_URL$2" 2>"$tmp/curl.err" || echo "curl-failed"
}
# expect CODE METHOD PATH TOKEN [JSON]: fails unless the status is CODE.
expect() {
  local want=$1 got; shift
  got=$(api "$@")
  [[ $got == "$want" ]] || { show "$tmp/body"; show "$tmp/curl.err"; fail "$1 $2: HTTP $got, want $want"; }
}
# field EXPR: a Python expression over the last response body `b` (JSON).
field() {
  "$py" -c 'import json, sys; b = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
    "$tmp/body" "$1" 2>/dev/null
}
admin=""  # set after start
user=""

# --- start ---------------------------------------------------------------------------------
t0=$(ms)
if ! "$root/tools/kube/start" "$dir" >"$tmp/start.out" 2>"$tmp/start.err"; then
  show "$tmp/start.err"
  fail "tools/kube/start failed (are the binaries built? run tools/kube/setup)"
fi
# shellcheck source=/dev/null
. "$dir/env"
note "started in $(( $(ms) - t0 )) ms: $KMODD_KUBE_URL"
admin=$KMODD_KUBE_TOKEN
user=$KMODD_KUBE_TOKEN_USER
for k in URL CA TOKEN TOKEN_USER KUBECONFIG APISERVER_PID ETCD_PID; do
  v=KMODD_KUBE_$k
  [[ -n ${!v:-} ]] || fail "DIR/env lacks $v"
done
{ [[ -f $KMODD_KUBE_KUBECONFIG ]] && grep -q "server: $KMODD_KUBE_URL" "$KMODD_KUBE_KUBECONFIG" \
  && grep -q "token: $admin" "$KMODD_KUBE_KUBECONFIG"; } || fail "the kubeconfig lacks the URL or the admin token"

# --- 1. health and version -----------------------------------------------------------------
expect 200 GET /readyz "$admin"
[[ $(cat "$tmp/body") == ok ]] || { show "$tmp/body"; fail "/readyz is not ok"; }
expect 200 GET /version "$admin"
version=$(field 'b["gitVersion"]')
[[ $version == "${KMODD_KUBE_VERSION:-v1.}"* ]] || fail "/version says $version, want ${KMODD_KUBE_VERSION:-v1.x}"
note "kube-apiserver $version"

# --- 2. a CustomResourceDefinition ---------------------------------------------------------
crd='{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
  "metadata":{"name":"widgets.harness.kmodd.io"},
  "spec":{"group":"harness.kmodd.io","scope":"Namespaced",
    "names":{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"},
    "versions":[{"name":"v1","served":true,"storage":true,
      "schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object",
        "properties":{"size":{"type":"integer","minimum":1}}}}}}}]}}'
expect 201 POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions "$admin" "$crd"
established=""
for _ in $(seq 100); do
  api GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.harness.kmodd.io "$admin" >/dev/null
  established=$(field '[c["status"] for c in b["status"].get("conditions", []) if c["type"] == "Established"]')
  [[ $established == "['True']" ]] && break
  sleep 0.1
done
[[ $established == "['True']" ]] || { show "$tmp/body"; fail "the CRD never became Established"; }
expect 201 POST /api/v1/namespaces "$admin" \
  '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"kmodd-test"}}'
# The new resource is served a moment after Established: retry while it is 404.
widget='{"apiVersion":"harness.kmodd.io/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"size":3}}'
for _ in $(seq 50); do
  code=$(api POST /apis/harness.kmodd.io/v1/namespaces/kmodd-test/widgets "$admin" "$widget")
  [[ $code == 404 ]] || break
  sleep 0.1
done
[[ $code == 201 ]] || { show "$tmp/body"; fail "creating a Widget: HTTP $code, want 201"; }
bad='{"apiVersion":"harness.kmodd.io/v1","kind":"Widget","metadata":{"name":"w0"},"spec":{"size":0}}'
expect 422 POST /apis/harness.kmodd.io/v1/namespaces/kmodd-test/widgets "$admin" "$bad"
note "CRD established; its schema is enforced"

# --- 3. RBAC -------------------------------------------------------------------------------
expect 403 GET /api/v1/namespaces/kmodd-test/secrets "$user"
[[ $(field 'b["details"]["kind"]') == secrets ]] || { show "$tmp/body"; fail "the 403 is not about secrets"; }
expect 401 GET /api/v1/namespaces/kmodd-test/secrets "not-a-token"
expect 200 GET /api/v1/namespaces/kmodd-test/secrets "$admin"
expect 403 GET /api/v1/namespaces/kmodd-test/configmaps "$user"
expect 201 POST /apis/rbac.authorization.k8s.io/v1/namespaces/kmodd-test/roles "$admin" \
  '{"metadata":{"name":"read-configmaps"},
    "rules":[{"apiGroups":[""],"resources":["configmaps"],"verbs":["get","list"]}]}'
expect 201 POST /apis/rbac.authorization.k8s.io/v1/namespaces/kmodd-test/rolebindings "$admin" \
  '{"metadata":{"name":"kmodd-user-reads-configmaps"},
    "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"read-configmaps"},
    "subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"kmodd-user"}]}'
code=""
for _ in $(seq 50); do  # the authorizer sees new bindings through an informer: a moment
  code=$(api GET /api/v1/namespaces/kmodd-test/configmaps "$user")
  [[ $code == 200 ]] && break
  sleep 0.1
done
[[ $code == 200 ]] || { show "$tmp/body"; fail "kmodd-user may not list configmaps after its RoleBinding (HTTP $code)"; }
expect 403 GET /api/v1/namespaces/kmodd-test/secrets "$user"
expect 403 GET /api/v1/namespaces/default/configmaps "$user"
note "RBAC: 403 for secrets, 401 for a bad token, a RoleBinding grants only what it names"

# --- 4. TokenRequest and TokenReview -------------------------------------------------------
expect 201 POST /api/v1/namespaces/kmodd-test/serviceaccounts "$admin" \
  '{"metadata":{"name":"kmodd-agent"}}'
expect 201 POST /api/v1/nodes "$admin" '{"metadata":{"name":"node-a"}}'
node_uid=$(field 'b["metadata"]["uid"]')
expect 201 POST /api/v1/namespaces/kmodd-test/serviceaccounts/kmodd-agent/token "$admin" \
  '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest",
    "spec":{"audiences":["kmodd"],"expirationSeconds":600,
      "boundObjectRef":{"apiVersion":"v1","kind":"Node","name":"node-a","uid":"'"$node_uid"'"}}}'
sa_token=$(field 'b["status"]["token"]')
[[ $sa_token == ey* ]] || { show "$tmp/body"; fail "the TokenRequest returned no token"; }
review() {  # review [AUDIENCE]: TokenReview of $sa_token by the admin
  local aud=""
  [[ -n ${1:-} ]] && aud=',"audiences":["'"$1"'"]'
  expect 201 POST /apis/authentication.k8s.io/v1/tokenreviews "$admin" \
    '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"'"$sa_token"'"'"$aud"'}}'
}
review kmodd
[[ $(field 'b["status"].get("authenticated")') == True ]] || { show "$tmp/body"; fail "TokenReview (audience kmodd) did not authenticate the token"; }
[[ $(field 'b["status"]["user"]["username"]') == system:serviceaccount:kmodd-test:kmodd-agent ]] \
  || { show "$tmp/body"; fail "TokenReview: wrong username"; }
[[ $(field 'b["status"]["audiences"]') == "['kmodd']" ]] || { show "$tmp/body"; fail "TokenReview: wrong audiences"; }
[[ $(field 'b["status"]["user"]["extra"]["authentication.kubernetes.io/node-name"]') == "['node-a']" ]] \
  || { show "$tmp/body"; fail "TokenReview: the node binding (extra node-name) is missing"; }
review
[[ $(field 'b["status"].get("authenticated", False)') == False ]] \
  || { show "$tmp/body"; fail "TokenReview without audience kmodd authenticated a kmodd-audience token"; }
expect 200 DELETE /api/v1/nodes/node-a "$admin"
# kube-apiserver caches a successful token authentication for 10 s: poll a little longer.
t0=$(ms)
while :; do
  review kmodd
  [[ $(field 'b["status"].get("authenticated", False)') == False ]] && break
  (( $(ms) - t0 < 15000 )) || { show "$tmp/body"; fail "TokenReview still authenticates a token bound to a Node deleted 15 s ago"; }
  sleep 0.5
done
note "the token stopped authenticating $(( $(ms) - t0 )) ms after node-a was deleted"
note "TokenRequest + TokenReview: audience kmodd, bound to node-a, invalid once node-a is gone"

# --- 5. kube-apiserver restart keeps the data ----------------------------------------------
expect 201 POST /api/v1/namespaces/kmodd-test/configmaps "$admin" \
  '{"metadata":{"name":"survivor"},"data":{"k":"v"}}'
old_pid=$KMODD_KUBE_APISERVER_PID
t0=$(ms)
if ! "$root/tools/kube/start" --restart-apiserver "$dir" >"$tmp/start.out" 2>"$tmp/start.err"; then
  show "$tmp/start.err"
  fail "tools/kube/start --restart-apiserver failed"
fi
# shellcheck source=/dev/null
. "$dir/env"
note "kube-apiserver restarted in $(( $(ms) - t0 )) ms"
[[ $KMODD_KUBE_APISERVER_PID != "$old_pid" ]] || fail "the kube-apiserver pid did not change"
kill -0 "$old_pid" 2>/dev/null && fail "the old kube-apiserver (pid $old_pid) still runs"
expect 200 GET /api/v1/namespaces/kmodd-test/configmaps/survivor "$admin"
[[ $(field 'b["data"]["k"]') == v ]] || { show "$tmp/body"; fail "the configmap lost its data"; }
expect 200 GET /apis/harness.kmodd.io/v1/namespaces/kmodd-test/widgets/w1 "$admin"
[[ $(field 'b["spec"]["size"]') == 3 ]] || { show "$tmp/body"; fail "the Widget lost its spec"; }
expect 403 GET /api/v1/namespaces/kmodd-test/secrets "$user"
expect 200 GET /api/v1/namespaces/kmodd-test/configmaps "$user"

# --- 6. stop -------------------------------------------------------------------------------
"$root/tools/kube/stop" "$dir" || fail "tools/kube/stop failed"
for pid in "$KMODD_KUBE_APISERVER_PID" "$KMODD_KUBE_ETCD_PID"; do
  state=$(ps -o stat= -p "$pid" 2>/dev/null) && [[ $state != Z* ]] && fail "pid $pid still runs after stop"
done
echo "PASS: kube harness"

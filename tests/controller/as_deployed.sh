# Sourced by the Kubernetes-mode tests, after `k` (kubectl as the harness's admin) is defined
# and namespace kmodd-system exists: the controller then runs with what deploy/ gives it and
# nothing more. Its service account (and the agent's), deploy/base's RBAC (no Secret or
# ConfigMap create; Secrets readable only in the namespaces given), the Secret and
# ConfigMap it fills shipped empty, and the admission policy on its writes; a kubeconfig
# with a token of its service account instead of the admin's.
#
# as_deployed SRC KUBECONFIG_OUT [MODULE_NAMESPACE...]
#   MODULE_NAMESPACE: the namespaces given to it for pull secrets, as an overlay or Helm's
#   moduleNamespaces would (kmodd-system is given by the base).
as_deployed() {
  local src=$1 out=$2 f ns token
  shift 2
  for f in serviceaccounts rbac pull-secrets certificates policy; do
    k apply -f "$src/deploy/base/$f.yaml" >/dev/null || return 1
  done
  for ns in "$@"; do
    # The Role and RoleBinding's own namespace (two-space indent), not the subject's.
    sed "s/^  namespace: kmodd-system$/  namespace: $ns/" "$src/deploy/base/pull-secrets.yaml" |
      k apply -f - >/dev/null || return 1
  done
  token=$(k -n kmodd-system create token kmodd-controller --duration 2h) || return 1
  k config view --raw --minify -o json | python3 -c '
import json, sys
c = json.load(sys.stdin)
c["users"] = [{"name": "kmodd-controller", "user": {"token": sys.argv[1]}}]
c["contexts"][0]["context"]["user"] = "kmodd-controller"
json.dump(c, sys.stdout)' "$token" >"$out" || return 1
  chmod 600 "$out"
  [[ $(kubectl --kubeconfig "$out" auth whoami -o jsonpath='{.status.userInfo.username}') == \
     system:serviceaccount:kmodd-system:kmodd-controller ]] || return 1
}

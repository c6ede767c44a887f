#!/usr/bin/env bash
# End-to-end checks of the kmodd-controller CLI on the examples and on broken input.
# usage: cli_test.sh BIN_DIR REPO_ROOT CASE
set -uo pipefail
bin="$1/kmodd-controller"
root="$2"
case_name="$3"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*"; exit 1; }
expect_rc() {  # expect_rc WANT CMD...
  local want=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq "$want" ] || { cat "$tmp/out" "$tmp/err"; fail "exit $rc, want $want: $*"; }
}
expect_in() {  # expect_in FILE TEXT
  grep -qF -- "$2" "$1" || { cat "$1"; fail "missing in $(basename "$1"): $2"; }
}

case "$case_name" in
  examples-validate)
    expect_rc 0 "$bin" validate -f "$root/examples/modules"
    expect_in "$tmp/out" "4 Module(s) valid"
    ;;
  examples-plan-golden)
    for fmt in yaml json table; do
      expect_rc 0 "$bin" plan --modules "$root/examples/modules" --nodes "$root/examples/nodes.yaml" -o "$fmt"
      diff -u "$root/tests/cli/golden/examples-plan.$fmt" "$tmp/out" || fail "plan -o $fmt differs from golden"
    done
    ;;
  plan-json-is-json)
    expect_rc 0 "$bin" plan --modules "$root/examples/modules" --nodes "$root/examples/nodes.yaml" -o json
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["kind"]=="List" and d["items"]' "$tmp/out" \
      || fail "plan -o json is not a JSON List"
    ;;
  invalid-reports-paths)
    expect_rc 1 "$bin" validate -f "$root/tests/cli/data/invalid.yaml"
    expect_in "$tmp/err" "invalid.yaml:11: Module ops/broken: spec.moduleLoader.container.kernelMappings[0].regexp:"
    expect_in "$tmp/err" "Module ops/broken: spec.moduleLoader.container.kernelMappings[1].containerImage"
    expect_in "$tmp/err" "Module ops/typed: spec.moduleLoader.container.modprobe.firmwarePath: expected a string, got a number"
    expect_in "$tmp/err" "Module ops/typed: spec.moduleLoader.container.kernelMappings[0].regexp: expected a string, got a list"
    expect_in "$tmp/err" "Module ops/typed: spec.selector: missing; set the node labels"
    expect_in "$tmp/err" "warning: $root/tests/cli/data/invalid.yaml:26: Module ops/typed: spec.moduleLoader.container.kernalMappings: unknown field"
    ;;
  kubernetes-only-warned)
    # A device plugin is a DaemonSet: without Kubernetes it is said once, never dropped silently.
    expect_rc 0 "$bin" validate -f "$root/examples/modules"
    expect_in "$tmp/err" "warning: $root/examples/modules/gpu.yaml:40: Module intel-gpu/gpu-xe: spec.devicePlugin: not acted on without Kubernetes"
    [[ $(grep -c "not acted on without Kubernetes" "$tmp/err") == 1 ]] || { cat "$tmp/err"; fail "want one warning"; }
    expect_rc 0 "$bin" plan --modules "$root/examples/modules" --nodes "$root/examples/nodes.yaml"
    expect_in "$tmp/err" "spec.devicePlugin: not acted on without Kubernetes: the device plugin runs as a DaemonSet, which only \`kmodd-controller run --kubernetes\` makes; the module itself is loaded"
    ;;
  invalid-plan-exits-1)
    expect_rc 1 "$bin" plan --modules "$root/tests/cli/data/invalid.yaml" --nodes "$root/examples/nodes.yaml"
    expect_in "$tmp/err" "no plan"
    [ ! -s "$tmp/out" ] || fail "plan printed output despite invalid Modules"
    ;;
  usage-errors)
    expect_rc 2 "$bin" plan --modules "$root/examples/modules"
    expect_in "$tmp/err" "both --modules and --nodes are required"
    expect_rc 2 "$bin" plan --modules "$root/examples/modules" --nodes "$root/examples/nodes.yaml" -o xml
    expect_rc 1 "$bin" validate -f "$tmp/does-not-exist.yaml"
    expect_in "$tmp/err" "does-not-exist.yaml: cannot open"
    expect_rc 2 "$bin" frobnicate
    # Plain text in Kubernetes mode would hand any client any node's pull secrets.
    expect_rc 2 "$bin" run --kubernetes --kubeconfig "$tmp/none" --namespace kmodd-system --insecure
    expect_in "$tmp/err" "--kubernetes does not take --insecure: over plain text any client could claim any node and be handed its pull secrets"
    expect_rc 2 "$bin" run --kubernetes --kubeconfig "$tmp/none" --namespace kmodd-system --cert c
    expect_in "$tmp/err" "give all of --cert, --key and --ca, or none (self-managed)"
    ;;
  flag-errors)
    # Every usage error names the flag, the value and what it wants, and exits 2.
    expect_rc 2 "$bin" run --modules-dri "$tmp" --insecure
    expect_in "$tmp/err" "unknown flag --modules-dri (did you mean --modules-dir?); \`kmodd-controller run --help\` lists the flags"
    expect_rc 2 "$bin" run --modules-dir "$tmp" --insecure --forget-after -5
    expect_in "$tmp/err" "--forget-after \"-5\": want a whole number of at least 0"
    expect_rc 2 "$bin" run --modules-dir "$tmp" --insecure --sync-max-streams-per-connection 99999999999999999999
    expect_in "$tmp/err" "--sync-max-streams-per-connection \"99999999999999999999\": want a whole number from 1 to 2147483647"
    expect_rc 2 "$bin" run --modules-dir "$tmp" --insecure --log-level loud
    expect_in "$tmp/err" "--log-level \"loud\": want debug, info, warn or error"
    expect_rc 2 "$bin" status --status-file a --status-file b
    expect_in "$tmp/err" "--status-file is given more than once; give it once"
    expect_rc 2 "$bin" validate -f --nodes
    expect_in "$tmp/err" "-f needs a path (a Module manifest or a directory); \"--nodes\" is a flag"
    expect_rc 2 "$bin" plan --modules= --nodes "$root/examples/nodes.yaml"
    expect_in "$tmp/err" "--modules is empty"
    expect_rc 2 "$bin" plan --modules "$root/examples/modules" --nodes "$root/examples/nodes.yaml" -o xml
    expect_in "$tmp/err" "-o \"xml\": want yaml, json or table"
    expect_rc 2 "$bin" status extra
    expect_in "$tmp/err" "unexpected argument \"extra\": kmodd-controller status takes no arguments"
    # --flag=value is the same as --flag value; --help lists every flag with its help.
    expect_rc 0 "$bin" plan --modules="$root/examples/modules" --nodes="$root/examples/nodes.yaml" -o=table
    diff -u "$root/tests/cli/golden/examples-plan.table" "$tmp/out" || fail "plan with --flag=value differs"
    expect_rc 0 "$bin" run --help
    expect_in "$tmp/out" "usage: kmodd-controller run (--modules-dir DIR |"
    expect_in "$tmp/out" "  --sync-max-streams-per-connection N"
    expect_in "$tmp/out" "Kubernetes mode: without --cert/--key/--ca the certificates are self-managed"
    expect_rc 0 "$bin" --help
    expect_in "$tmp/out" "usage: kmodd-controller COMMAND [ARGS]"
    expect_rc 2 "$bin"
    expect_in "$tmp/err" "kmodd-controller needs a COMMAND"
    ;;
  rollout-errors)
    # `rollout`: usage errors, a Module without a policy, a file it will not rewrite, and a
    # pause that leaves the directory valid with only spec.paused changed.
    expect_rc 2 "$bin" rollout restart ns/m --modules-dir "$tmp"
    expect_in "$tmp/err" '"restart": expected status, pause, resume or undo'
    expect_rc 2 "$bin" rollout pause just-a-name --modules-dir "$tmp"
    expect_in "$tmp/err" "give the Module as NAMESPACE/NAME"
    expect_rc 2 "$bin" rollout pause ns/m
    expect_in "$tmp/err" "pause needs --modules-dir"
    mkdir -p "$tmp/mods"
    cat >"$tmp/mods/m.yaml" <<'YAML'
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: m, namespace: ns}
spec:
  selector: {}
  moduleLoader:
    container:
      modprobe: {moduleName: m}
      kernelMappings: [{regexp: '^.*$', containerImage: 'r/m:1'}]
YAML
    expect_rc 1 "$bin" rollout undo ns/m --modules-dir "$tmp/mods"
    expect_in "$tmp/err" "Module ns/m has no ModulePolicy in $tmp/mods: add one"
    expect_rc 1 "$bin" rollout pause ns/other --modules-dir "$tmp/mods"
    expect_in "$tmp/err" "no Module ns/other in $tmp/mods"
    printf '%s\n' '# the rollout policy of m' 'apiVersion: kmodd.io/v1alpha1' 'kind: ModulePolicy' \
      'metadata: {name: p, namespace: ns}' 'spec: {moduleName: m, rollout: {maxParallel: 2}}' >"$tmp/mods/p.yaml"
    cp "$tmp/mods/p.yaml" "$tmp/p.before"
    expect_rc 1 "$bin" rollout pause ns/m --modules-dir "$tmp/mods"
    expect_in "$tmp/err" "has comments, which rewriting it would lose"
    cmp -s "$tmp/mods/p.yaml" "$tmp/p.before" || fail "a refused pause changed the file"
    sed -i '/^#/d' "$tmp/mods/p.yaml"
    expect_rc 0 "$bin" rollout pause ns/m --modules-dir "$tmp/mods"
    expect_in "$tmp/out" "Module ns/m: rollout of revision"
    python3 - "$tmp/mods/p.yaml" <<'PY' || fail "pause did not set spec.paused alone"
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
assert d["spec"] == {"moduleName": "m", "rollout": {"maxParallel": 2}, "paused": True}, d
PY
    expect_rc 0 "$bin" validate -f "$tmp/mods"
    [ -z "$(find "$tmp/mods" -name '.*')" ] || fail "a temporary file was left in the directory"
    expect_rc 1 "$bin" rollout status ns/m --status-file "$tmp/none.yaml"
    expect_in "$tmp/err" "is \`kmodd-controller run\` running with this --status-file?"
    ;;
  nothing-found)
    # Inputs that hold no Module (or no Node) are errors, not an empty success.
    expect_rc 1 "$bin" validate -f "$root/examples/nodes.yaml"
    expect_in "$tmp/err" "no Module found in $root/examples/nodes.yaml"
    expect_in "$tmp/err" "Node(s): \`plan --nodes\` reads those"
    : > "$tmp/empty.yaml"
    expect_rc 1 "$bin" validate -f "$tmp/empty.yaml"
    expect_in "$tmp/err" "no Module found in $tmp/empty.yaml"
    expect_rc 1 "$bin" plan --modules "$root/examples/modules" --nodes "$tmp/empty.yaml"
    expect_in "$tmp/err" "no Node found in --nodes $tmp/empty.yaml"
    [ ! -s "$tmp/out" ] || fail "plan printed a table for no Node"
    expect_rc 1 "$bin" plan --modules "$root/examples/nodes.yaml" --nodes "$root/examples/modules"
    expect_in "$tmp/err" "no Module found in --modules"
    expect_in "$tmp/err" "swapped arguments?"
    expect_rc 2 "$bin" validate -f
    expect_in "$tmp/err" "-f needs a path"
    expect_rc 2 "$bin" plan --modules "$root/examples/modules" --nodes
    expect_in "$tmp/err" "--nodes needs a value"
    # The missing path is named once; a skipped document names its kind once.
    expect_rc 1 "$bin" validate -f "$tmp/does-not-exist.yaml"
    [ "$(grep -o "does-not-exist.yaml" "$tmp/err" | wc -l)" -eq 1 ] || { cat "$tmp/err"; fail "path printed more than once"; }
    printf 'apiVersion: v1\nkind: Secret\nmetadata:\n  name: x\n' > "$tmp/cm.yaml"
    expect_rc 1 "$bin" validate -f "$tmp/cm.yaml"
    expect_in "$tmp/err" "kind: Secret is not read by kmodd; document skipped"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "ok: $case_name"

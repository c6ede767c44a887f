#!/usr/bin/env bash
# The Kubernetes client against a real kube-apiserver: starts one with tools/kube/start in a
# temporary directory, runs the [kube] cases of the unit binary against it, stops it.
# Without the harness (tools/kube/setup) it fails, never skips.
#
# usage: kube_test.sh BIN_DIR SOURCE_DIR
set -euo pipefail

bin=$1
src=$2
fail() { echo "kube_test: FAIL: $*" >&2; exit 1; }
# shellcheck source=tests/lib/harness.bash
source "$src/tests/lib/harness.bash"
declare dir
make_temp_dir dir kmodd-kube-test

# Its env (KMODD_KUBE_KUBECONFIG, ...) exported: the [kube] cases read it.
kube_start "$dir/kube"
# -w NoTests: a filter that matches nothing (a renamed tag) fails instead of passing.
"$bin/kmodd_unit_tests" "[kube]" -w NoTests

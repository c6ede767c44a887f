#!/usr/bin/env bash
# The Kubernetes client against a real kube-apiserver: starts one with tools/kube/start in a
# temporary directory, runs the [kube] cases of the unit binary against it, stops it.
# Without the harness (tools/kube/setup) it fails, never skips.
#
# usage: kube_test.sh BIN_DIR SOURCE_DIR
set -euo pipefail

bin=$1
src=$2
dir=$(mktemp -d /tmp/kmodd-kube-test-XXXXXX)
cleanup() {
  "$src/tools/kube/stop" "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

if ! "$src/tools/kube/start" "$dir" >/dev/null; then
  echo "kube_test: tools/kube/start failed (run tools/kube/setup first)" >&2
  exit 1
fi
set -a
# shellcheck disable=SC1091
source "$dir/env"
set +a
# -w NoTests: a filter that matches nothing (a renamed tag) fails instead of passing.
"$bin/kmodd_unit_tests" "[kube]" -w NoTests

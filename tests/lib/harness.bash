# shellcheck shell=bash
# What the integration scripts share: a temporary directory, background processes and
# harnesses stopped on every way out, polling, free ports, and failing loudly when a
# prerequisite is missing (these tests never skip). Sourced by tests/**/*_test.sh:
#
#   # shellcheck source=tests/lib/harness.bash
#   . "$src/tests/lib/harness.bash"
#
# The caller defines fail MESSAGE (prints, exits non-zero) before using any helper; a
# default is below. Works under set -e and set -u.

if ! declare -F fail >/dev/null; then
  fail() { echo "FAIL: $*" >&2; exit 1; }
fi

# --- cleanup on exit ------------------------------------------------------------------
# Background processes to stop at exit: `cmd & pids+=($!)`.
pids=()
# Commands run at exit, last registered first (a harness stops before its directory goes).
harness_on_exit=()

on_exit() {  # on_exit CMD...: runs CMD at exit (its status ignored)
  harness_on_exit+=("$(printf '%q ' "$@")")
}
quietly() { "$@" >/dev/null 2>&1; }  # quietly CMD...: CMD without its output

stop_pids() {  # SIGTERM to every pid in pids (SIGCONT too: a stopped one gets it), then wait
  local p
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
    kill -CONT "$p" 2>/dev/null || true
  done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}

harness_cleanup() {
  local i
  stop_pids
  for ((i = ${#harness_on_exit[@]} - 1; i >= 0; i--)); do
    eval "${harness_on_exit[i]}" || true
  done
}
trap harness_cleanup EXIT

# make_temp_dir VAR NAME [KEEP_VAR]: a new directory ${TMPDIR:-/tmp}/NAME.XXXXXX (physical
# path) in VAR, removed at exit unless the variable named KEEP_VAR is set (it is then named).
# Not in $(...): the removal is registered in this shell. A `declare VAR` before it lets
# the linter know that VAR is set.
make_temp_dir() {
  local harness_new  # not a name a caller passes: printf -v would set this local instead
  harness_new=$(mktemp -d "${TMPDIR:-/tmp}/$2.XXXXXX") || fail "mktemp failed"
  harness_new=$(cd "$harness_new" && pwd -P)
  printf -v "$1" '%s' "$harness_new"
  on_exit keep_or_remove "$harness_new" "${3:-}"
}
keep_or_remove() {  # keep_or_remove DIR KEEP_VAR
  if [[ -n $2 && -n ${!2:-} ]]; then echo "# kept: $1" >&2; else rm -rf "$1"; fi
}

# --- prerequisites --------------------------------------------------------------------
require_tools() {  # require_tools TOOL...: each on PATH (or an absolute path that exists)
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null || fail "$t not found: run tools/bootstrap (these tests never skip)"
  done
}
require_bins() {  # require_bins BIN_DIR NAME...: each built
  local dir=$1 b
  shift
  for b in "$@"; do
    [[ -x $dir/$b ]] || fail "$dir/$b is missing: build first"
  done
}

# --- waiting --------------------------------------------------------------------------
# eventually SECONDS CMD...: runs CMD (output discarded) every 0.1 s until it succeeds;
# returns 1 when SECONDS pass first. A caller that can tell the wait is hopeless (its VM
# died) defines eventually_guard, called between tries, which may fail.
eventually() {
  local end=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < end)) || return 1
    if declare -F eventually_guard >/dev/null; then eventually_guard; fi
    sleep 0.1
  done
}

# A TCP port free on 127.0.0.1 now (for a server that must be told its port up front).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# --- harnesses ------------------------------------------------------------------------
# The root of the checkout, for tools/.
harness_src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# kube_start DIR: a kube-apiserver and etcd (tools/kube/start) in DIR, stopped at exit; its
# env (KMODD_KUBE_URL, _KUBECONFIG, ...) exported, kubectl (from tools/kube/setup) on PATH.
# Its output goes to DIR.log.
kube_start() {
  on_exit quietly "$harness_src/tools/kube/stop" "$1"
  if ! "$harness_src/tools/kube/start" "$1" >"$1.log" 2>&1; then
    tail -n 30 "$1.log" >&2
    fail "tools/kube/start failed (run tools/kube/setup first)"
  fi
  set -a
  # shellcheck source=/dev/null
  . "$1/env"
  set +a
  export PATH="$KMODD_KUBE_BIN:$PATH"
}

# registry_start DIR [MODE]: a registry (tools/registry/start MODE, http by default) in DIR,
# stopped at exit; its env (KMODD_REGISTRY, ...) loaded. Its output goes to DIR.log.
registry_start() {
  on_exit quietly "$harness_src/tools/registry/stop" "$1"
  if ! "$harness_src/tools/registry/start" "${2:-http}" "$1" >"$1.log" 2>&1; then
    tail -n 30 "$1.log" >&2
    fail "tools/registry/start ${2:-http} failed"
  fi
  # shellcheck source=/dev/null
  . "$1/env"
}

#!/usr/bin/env bash
# Rollouts in standalone mode (issue 15): kmodd-controller with a Module and its
# ModulePolicy in a watched directory, 120 simulated agents (kmodd-loadgen) that load in
# 200 ms, fail on chosen nodes, and write every phase change they report. The checks read
# the agents' own timeline (not the controller's log): how many nodes were loading the new
# image at every moment, which nodes ever ran it, and what each node runs in the end.
#
#   1. v1 without a policy reaches every node at once; a policy added then changes nothing
#   2. v2: the 3 canaries only, then the rollout waits, through a restart of the controller
#      too; `rollout resume` rolls it on, never more than maxParallel (10 % = 12) nodes
#      loading at once
#   3. v3 fails on canary sim-0: halted, sim-0 rolled back to v2, no other node but the
#      canaries ever loads v3; `rollout undo` sends the canaries back to v2
#
# usage: rollout_test.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
# shellcheck source=tests/lib/harness.bash
. "$src/tests/lib/harness.bash"
require_bins "$bin" kmodd-controller kmodd-loadgen
require_tools python3 curl

declare tmp
make_temp_dir tmp kmodd-rollout KMODD_KEEP
mods=$tmp/modules
mkdir -p "$mods"
nodes=120

module() {  # module TAG: the Module with image drv:TAG
  cat >"$mods/.module.new" <<EOF
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: drv, namespace: fleet}
spec:
  selector: {}
  moduleLoader:
    container:
      modprobe: {moduleName: drv}
      kernelMappings:
        - regexp: '^.*$'
          containerImage: registry.local/drv:$1
EOF
  mv "$mods/.module.new" "$mods/module.yaml"
}
policy() {
  cat >"$mods/.policy.new" <<'EOF'
apiVersion: kmodd.io/v1alpha1
kind: ModulePolicy
metadata: {name: drv-rollout, namespace: fleet}
spec:
  moduleName: drv
  rollout:
    maxParallel: 10%
    canary: {count: 3}
    maxFailed: 2
EOF
  mv "$mods/.policy.new" "$mods/policy.yaml"
}
module v1

port=$(free_port)
metrics_port=$(free_port)
start_controller() {  # appends to controller.log; sets ctl_pid
  "$bin/kmodd-controller" run --modules-dir "$mods" --insecure --listen "127.0.0.1:$port" \
    --status-file "$tmp/status.yaml" --metrics "127.0.0.1:$metrics_port" >>"$tmp/controller.log" 2>&1 &
  pids+=($!)
  ctl_pid=$!
  eventually 20 listening || fail "controller did not start: $(tail -5 "$tmp/controller.log")"
}
listening() { [[ $(grep -c 'sync server listening' "$tmp/controller.log") -ge $starts ]]; }
starts=1
start_controller
# --reconnect: the agents come back to a restarted controller, with what they run.
"$bin/kmodd-loadgen" --controller "127.0.0.1:$port" --insecure --agents "$nodes" --load-ms 200 \
  --fail-image drv:v3 --fail-nodes sim-0 --timeline "$tmp/timeline.jsonl" --reconnect >"$tmp/loadgen.log" 2>&1 &
pids+=($!)
lg_pid=$!
eventually 60 grep -q "^connected $nodes" "$tmp/loadgen.log" || fail "agents not served: $(tail -5 "$tmp/loadgen.log")"

rollout() { "$bin/kmodd-controller" rollout "$@" fleet/drv --status-file "$tmp/status.yaml" --modules-dir "$mods"; }
field() {  # field NAME: the rollout's NAME from the status file
  python3 - "$tmp/status.yaml" "$1" <<'EOF'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
for m in doc.get("modules", []):
    if m["namespace"] == "fleet" and m["name"] == "drv":
        print(m["status"]["rollout"][sys.argv[2]])
EOF
}
phase_is() { [[ $(field phase) == "$1" ]]; }
revision_rolled() { [[ $(field revision) != "$1" ]]; }

available() {
  python3 - "$tmp/status.yaml" <<'EOF'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
print(next(m["status"]["moduleLoader"]["availableNumber"] for m in doc["modules"] if m["name"] == "drv"))
EOF
}
echo "=== 1. without a policy, every node at once; a policy added to a settled fleet changes nothing"
available_is() { [[ $(available) == "$1" ]]; }
eventually 60 available_is "$nodes" || fail "v1 not loaded everywhere: $(available)"
policy
eventually 20 phase_is Complete || fail "a settled fleet is not Complete: $(rollout status)"
rollout status >"$tmp/status-1.txt" || fail "a settled fleet is not Complete: $(cat "$tmp/status-1.txt")"
grep -q "$nodes Ready" "$tmp/status-1.txt" || fail "not every node Ready: $(cat "$tmp/status-1.txt")"

echo "=== 2. v2: canaries, then resume"
rev1=$(field revision)
module v2
eventually 20 revision_rolled "$rev1" || fail "the controller did not see v2"
eventually 30 phase_is WaitingAfterCanary || fail "canaries not Ready and waiting: $(rollout status)"
[[ $(field updated) == 3 && $(field ready) == 3 && $(field waiting) == 117 ]] ||
  fail "after the canaries: $(rollout status)"
sleep 1  # a controller that went on anyway would have started more nodes by now
[[ $(field updated) == 3 ]] || fail "the rollout did not wait after the canaries: $(rollout status)"
# A controller restarted here knows nothing it sent: the canaries run v2 already, the
# others must not be started (nor told to unload v1) until the rollout is resumed.
kill "$ctl_pid"
wait "$ctl_pid" 2>/dev/null || true
rm -f "$tmp/status.yaml"
starts=2
start_controller
# Connected, not served: the nodes that wait for their turn are sent nothing at all.
reconnected() { curl -fsS "http://127.0.0.1:$metrics_port/metrics" | grep -qx "kmodd_controller_agents_connected $nodes"; }
eventually 60 reconnected || fail "the agents did not come back: $(tail -3 "$tmp/loadgen.log")"
status_written() { [[ -s $tmp/status.yaml ]] && phase_is WaitingAfterCanary; }
eventually 30 status_written || fail "after the restart, not waiting after the canaries: $(rollout status)"
sleep 1
[[ $(field updated) == 3 && $(field waiting) == 117 ]] ||
  fail "after the restart the rollout went on: $(rollout status)"
resume_ms=$(date +%s%3N)
rollout resume | grep -q "resumed" || fail "rollout resume failed"
rollout status --wait 120 >"$tmp/status-2.txt" || fail "v2 did not complete: $(cat "$tmp/status-2.txt")"

echo "=== 3. v3 fails on a canary: halted, rolled back; then undo"
rev2=$(field revision)
module v3
eventually 20 revision_rolled "$rev2" || fail "the controller did not see v3"
if rollout status --wait 60 >"$tmp/status-3.txt"; then fail "a failed canary did not halt: $(cat "$tmp/status-3.txt")"; fi
grep -q "phase:    Halted: canary sim-0 Failed" "$tmp/status-3.txt" || fail "not halted by the canary: $(cat "$tmp/status-3.txt")"
grep -q "sim-0: simulated failure" "$tmp/status-3.txt" || fail "the failure is not named: $(cat "$tmp/status-3.txt")"
field_is() { [[ $(field "$1") == "$2" ]]; }
eventually 20 field_is rolledBack 1 || fail "sim-0 not rolled back: $(rollout status)"
# The halt on the controller's /metrics, as Prometheus would scrape it.
curl -fsS "http://127.0.0.1:$metrics_port/metrics" >"$tmp/metrics.txt" || fail "no /metrics"
grep -qx 'kmodd_controller_rollout_phase{namespace="fleet",name="drv",phase="Halted"} 1' "$tmp/metrics.txt" ||
  fail "the halt is not in /metrics: $(grep rollout_phase "$tmp/metrics.txt")"
grep -qx "kmodd_controller_agents_connected $nodes" "$tmp/metrics.txt" || fail "agents_connected is not $nodes"
grep -q '^kmodd_controller_push_ack_seconds_count [1-9]' "$tmp/metrics.txt" || fail "no push-to-ACK latency observed"
rollout undo | grep -q "undone" || fail "rollout undo failed"
eventually 20 phase_is Undone || fail "not undone: $(rollout status)"
sleep 2  # the canaries' way back to v2 (200 ms loads)

kill "$lg_pid"
wait "$lg_pid" 2>/dev/null || true
[[ -s $tmp/timeline.jsonl ]] || fail "no timeline written"

python3 - "$tmp/timeline.jsonl" "$nodes" "$resume_ms" <<'EOF' || fail "the agents' timeline breaks the policy (above)"
import json, sys
events = [json.loads(l) for l in open(sys.argv[1])]
nodes, resume_ms = int(sys.argv[2]), int(sys.argv[3])
events.sort(key=lambda e: (e["unix_ms"], e["phase"] == "LOADING"))  # ends before starts
bad = []
for tag in ("v2",):
    loading, peak = set(), 0
    for e in events:
        if not e["image"].endswith(":" + tag):
            continue
        if e["phase"] == "LOADING":
            loading.add(e["node"])
        else:
            loading.discard(e["node"])
        peak = max(peak, len(loading))
    print(f"{tag}: at most {peak} nodes loading at once")
    if peak > 12 or peak == 0:
        bad.append(f"{tag}: {peak} nodes loading at once (maxParallel is 12)")
early = sorted({e["node"] for e in events if e["image"].endswith(":v2") and e["unix_ms"] < resume_ms})
print("nodes that loaded v2 before the resume:", early)
if early != ["sim-0", "sim-1", "sim-10"]:
    bad.append(f"v2 reached {early} before the resume (the restart included), not the canaries alone")
v3 = sorted({e["node"] for e in events if e["image"].endswith(":v3")})
print("nodes that ever loaded v3:", v3)
if v3 != ["sim-0", "sim-1", "sim-10"]:
    bad.append(f"v3 reached {v3}, not the canaries alone")
last = {}
for e in events:
    last[e["node"]] = (e["image"].rsplit(":", 1)[1], e["phase"])
if len(last) != nodes:
    bad.append(f"{len(last)} nodes in the timeline, not {nodes}")
off = {n: s for n, s in last.items() if s != ("v2", "LOADED")}
if off:
    bad.append(f"not back on v2 LOADED: {off}")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
EOF
grep -q "rollout: node sent back to what it ran before the revision.*sim-0" "$tmp/controller.log" ||
  fail "the controller did not log sim-0's rollback"
kill -0 "$ctl_pid" || fail "the controller died"
echo "PASS"

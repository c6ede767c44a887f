"""The rollout benches' analysis (tools/bench/kube_rollout, tools/bench/rollout): the
phases they ran (WORK/phases.jsonl, from kube_rollout.py or the standalone driver) against
the agents' own timeline (WORK/timeline.jsonl, kmodd-loadgen --timeline) and the halt in
the controller's log (WORK/controller.log). Prints a table and one JSON line per phase.

  python3 rollout_timeline.py WORK N CHECK    (CHECK "1": exit 1 when a check fails)
"""
import json, math, sys
from datetime import datetime, timezone
work, n, check = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
events = [json.loads(l) for l in open(f"{work}/timeline.jsonl")]
events.sort(key=lambda e: (e["unix_ms"], e["phase"] == "LOADING"))
phases = [json.loads(l) for l in open(f"{work}/phases.jsonl")]
tags = {"install": "v1", "unpaced": "v2", "paced100": "v3", "paced10": "v4", "halt": "v5"}
# The controller's own log: when it halted.
halted_ms = None
for line in open(f"{work}/controller.log"):
    if '"rollout phase"' in line and '"phase":"Halted"' in line:
        ts = json.loads(line)["ts"]
        halted_ms = int(datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp() * 1000)
        break
bad = []
print(f"{'PHASE':<9} {'NODES':<6} {'TIME_S':<8} {'PEAK_LOADING':<13} {'PEAK_UNREADY':<13} {'CPU_S':<7} PEAK_RSS_MIB")
for p in phases:
    tag = tags.get(p["phase"])
    row = dict(p)
    if tag:
        # This phase's events: from its Module write to the next phase's.
        nxt = next((q["t0_unix_ms"] for q in phases if q["t0_unix_ms"] > p["t0_unix_ms"]), 1 << 62)
        mine = [e for e in events if e["image"].endswith(":" + tag) and p["t0_unix_ms"] <= e["unix_ms"] < nxt]
        loaded = [e["unix_ms"] for e in mine if e["phase"] in ("LOADED", "FAILED")]
        row["time_s"] = round((max(loaded) - p["t0_unix_ms"]) / 1000, 2) if loaded else None
        down, peak = set(), 0
        for e in mine:
            (down.add if e["phase"] == "LOADING" else down.discard)(e["node"])
            peak = max(peak, len(down))
        row["peak_loading"] = peak
    if p["phase"] == "halt":
        fails = sorted(e["unix_ms"] for e in mine if e["phase"] == "FAILED")
        started_after = [e["node"] for e in mine if e["phase"] == "LOADING" and halted_ms and e["unix_ms"] > halted_ms]
        row["failed"] = len(fails)
        row["started_after_halt"] = len(started_after)
        row["budget_exceeded_to_halt_ms"] = halted_ms - fails[2] if halted_ms and len(fails) >= 3 else None
        row["touched"] = len({e["node"] for e in mine})
        if check:
            if halted_ms is None: bad.append("the controller never logged the halt")
            if started_after: bad.append(f"nodes started after the halt: {started_after}")
            if len(fails) != 3: bad.append(f"{len(fails)} failures, expected 3")
    print(f"{p['phase']:<9} {n:<6} {str(row.get('time_s', '-')):<8} {str(row.get('peak_loading', '-')):<13} "
          f"{str(row.get('peak_unready_labels', '-')):<13} {row['controller_cpu_s']:<7} {row['controller_peak_rss_mib']}")
    print("json: " + json.dumps(row))
    if check and p["phase"] == "paced10":
        limit = math.ceil(n * 10 / 100)
        if row["peak_loading"] > limit: bad.append(f"paced10: {row['peak_loading']} loading at once (timeline), limit {limit}")
        if "peak_unready_labels" in p:  # Kubernetes mode: the labels' history too
            if p["peak_unready_labels"] > limit: bad.append(f"paced10: {p['peak_unready_labels']} Nodes without .ready at once (labels), limit {limit}")
            if p["label_events"] == 0: bad.append("paced10: the label watch saw nothing")
by = {p["phase"]: p for p in phases}
times = {}
for p in phases:
    tag = tags.get(p["phase"])
    if tag:
        nxt = next((q["t0_unix_ms"] for q in phases if q["t0_unix_ms"] > p["t0_unix_ms"]), 1 << 62)
        done = [e["unix_ms"] for e in events if e["image"].endswith(":" + tag) and e["phase"] in ("LOADED", "FAILED")
                and p["t0_unix_ms"] <= e["unix_ms"] < nxt]
        times[p["phase"]] = (max(done) - p["t0_unix_ms"]) / 1000 if done else None
if times.get("unpaced") and times.get("paced100"):
    print(f"paced100 / unpaced: {times['paced100'] / times['unpaced']:.2f}x "
          f"({times['paced100']:.2f} s / {times['unpaced']:.2f} s)")
last = {}
for e in events:
    last[e["node"]] = (e["image"].rsplit(":", 1)[1], e["phase"])
off = {k: v for k, v in last.items() if v != ("v4", "LOADED")}
print(f"after undo: {n - len(off)} of {n} nodes on v4 LOADED")
if check and (off or len(last) != n):
    bad.append(f"after undo, not on v4 LOADED: {dict(list(off.items())[:10])}")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)

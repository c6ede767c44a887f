"""tools/bench/kube_rollout's driver: one Module on N simulated nodes, changed again and
again, with and without a ModulePolicy. Each phase prints one JSON line ("json: ...").

  python3 kube_rollout.py PHASE N CONTROLLER_PID LIMIT_S OUT_DIR
    install    create Module drv (image :v1), no policy; until every node reports it Loaded
    unpaced    :v2, no policy (KMM's way: every node at once)
    paced100   a ModulePolicy with maxParallel 100%, then :v3
    paced10    maxParallel 10%, then :v4; the .ready labels watched the whole phase
    halt       maxParallel 10%, maxFailed 2, then :v5 (the loadgen fails it on 3 nodes)
    undo       `rollout undo` of :v5
Times come from the agents' own timeline (kmodd-loadgen --timeline, read after the bench
stops it): a phase starts at the Module write (t0, unix ms, in OUT_DIR/<phase>.t0) and ends
at the last LOADED of its image. Completion is waited for through the API (the Module's
status), the labels' history through a watch of the Nodes.
"""
import json, os, sys, threading, time
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kube_bench import GROUP, NS, conn, cpu_rss, req, wait  # noqa: E402

POLICY_PATH = f"/apis/kmodd.io/v1alpha1/namespaces/{NS}/modulepolicies"
MODULE = f"{GROUP}/namespaces/{NS}/modules/drv"
MERGE = "application/merge-patch+json"


def module_body(tag):
    return {"apiVersion": "kmm.sigs.x-k8s.io/v1beta1", "kind": "Module",
            "metadata": {"name": "drv", "namespace": NS},
            "spec": {"selector": {"role": "worker"}, "moduleLoader": {"container": {
                "modprobe": {"moduleName": "drv"},
                "kernelMappings": [{"regexp": "^.+$", "containerImage": f"127.0.0.1:5000/drv:{tag}"}]}}}}


def set_image(c, tag):
    req(c, "PATCH", MODULE, {"spec": {"moduleLoader": {"container": {"kernelMappings": [
        {"regexp": "^.+$", "containerImage": f"127.0.0.1:5000/drv:{tag}"}]}}}}, ctype=MERGE)


def set_policy(c, rollout):
    body = {"apiVersion": "kmodd.io/v1alpha1", "kind": "ModulePolicy",
            "metadata": {"name": "drv-rollout", "namespace": NS},
            "spec": {"moduleName": "drv", "rollout": rollout}}
    st, _ = req(c, "GET", f"{POLICY_PATH}/drv-rollout", ok=(200, 404))
    if st == 404:
        req(c, "POST", POLICY_PATH, body)
    else:
        # One merge patch: the fields this rollout leaves out are removed (null), never a
        # moment without them.
        full = {k: None for k in ("maxParallel", "maxFailed", "canary", "onFailure")}
        full.update(rollout)
        req(c, "PATCH", f"{POLICY_PATH}/drv-rollout", {"spec": {"rollout": full}}, ctype=MERGE)


def module_status(c):
    _, data = req(c, "GET", MODULE)
    return json.loads(data).get("status", {})




class LabelHistory(threading.Thread):
    """Watches every Node; records (unix ms, node, has the .ready label) on each change."""

    def __init__(self, label):
        super().__init__(daemon=True)
        self.label, self.events, self.state = label, [], {}
        _, data = req(conn(), "GET", "/api/v1/nodes")
        d = json.loads(data)
        for i in d["items"]:
            self.state[i["metadata"]["name"]] = self.label in i["metadata"].get("labels", {})
        self.rv = d["metadata"]["resourceVersion"]
        self.initial = dict(self.state)

    def run(self):
        from kube_bench import HDR
        c = conn()
        c.timeout = None
        c.request("GET", f"/api/v1/nodes?watch=1&resourceVersion={self.rv}&timeoutSeconds=900",
                  headers=HDR)
        r = c.getresponse()
        while True:
            line = r.readline()
            if not line:
                break
            ev = json.loads(line)
            if ev["type"] not in ("ADDED", "MODIFIED"):
                continue
            name = ev["object"]["metadata"]["name"]
            has = self.label in ev["object"]["metadata"].get("labels", {})
            if self.state.get(name) != has:
                self.state[name] = has
                self.events.append((int(time.time() * 1000), name, has))

    def peak_unready(self, since_ms):
        """The most nodes without the label at once, from since_ms on."""
        state = dict(self.initial)
        for ms, name, has in self.events:
            if ms < since_ms:
                state[name] = has
        down = {name for name, has in state.items() if not has}
        peak = len(down)
        for _, name, has in (e for e in self.events if e[0] >= since_ms):
            (down.discard if has else down.add)(name)
            peak = max(peak, len(down))
        return peak


def main():
    phase, n, pid, limit, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    c = conn()
    tags = {"install": "v1", "unpaced": "v2", "paced100": "v3", "paced10": "v4", "halt": "v5"}
    history = None
    if phase == "paced10":
        history = LabelHistory(f"kmm.node.kubernetes.io/{NS}.drv.ready")
        history.start()
        # The labels of the phase before settle first (they trail its agents' reports).
        wait(lambda: sum(history.state.values()) >= n, limit, "every Node labelled .ready")
        time.sleep(0.3)
    if phase == "paced100":
        set_policy(c, {"maxParallel": "100%"})
    elif phase == "paced10":
        set_policy(c, {"maxParallel": "10%"})
    elif phase == "halt":
        set_policy(c, {"maxParallel": "10%", "maxFailed": 2})
    if phase != "install":
        # The policy must be in force before the change it paces.
        time.sleep(1)
    before = module_status(c).get("rollout", {}).get("revision") if phase != "install" else None
    cpu0, _ = cpu_rss(pid)
    t0 = int(time.time() * 1000)
    if phase == "install":
        req(c, "POST", f"{GROUP}/namespaces/{NS}/modules", module_body("v1"))
    elif phase == "undo":
        rev = module_status(c)["rollout"]["revision"]
        req(c, "PATCH", f"{POLICY_PATH}/drv-rollout",
            {"metadata": {"annotations": {"kmodd.io/undo-revision": rev}}}, ctype=MERGE)
    else:
        set_image(c, tags[phase])
    open(os.path.join(out, f"{phase}.t0"), "w").write(str(t0))

    def rows_loaded():
        rows = module_status(c).get("nodes", [])
        return len([r for r in rows if r.get("phase") == "Loaded"]) >= n

    def rollout_phase(want):
        # The rollout of the new revision (the status may still show the last one's).
        def check():
            r = module_status(c).get("rollout", {})
            fresh = phase == "undo" or r.get("revision") != before
            return r if fresh and r.get("phase") in want else None
        return check

    res = {"phase": phase, "nodes": n, "t0_unix_ms": t0}
    if phase in ("install",):
        wait(rows_loaded, limit, phase)
    elif phase == "unpaced":
        # Every row Loaded again after t0 (the row's since is the agent's phase change).
        def since_ms(text):
            return int(datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")
                       .replace(tzinfo=timezone.utc).timestamp() * 1000)

        def settled():
            rows = module_status(c).get("nodes", [])
            return len(rows) >= n and all(r.get("phase") == "Loaded" and since_ms(r["since"]) >= t0
                                          for r in rows)
        wait(settled, limit, phase)
    elif phase in ("paced100", "paced10"):
        r = wait(rollout_phase({"Complete"}), limit, phase)
        res["rollout"] = {k: r.get(k) for k in ("ready", "failed", "waiting")}
    elif phase == "halt":
        r = wait(rollout_phase({"Halted"}), limit, phase)
        res["halted_unix_ms"] = int(time.time() * 1000)
        time.sleep(3)  # anything started after the halt would show in the timeline
        r = module_status(c)["rollout"]
        res["rollout"] = {k: r.get(k) for k in ("updated", "failed", "waiting", "rolledBack", "message")}
    elif phase == "undo":
        wait(rollout_phase({"Undone"}), limit, phase)
        time.sleep(3)
    cpu1, hwm = cpu_rss(pid)
    res["controller_cpu_s"] = round(cpu1 - cpu0, 2)
    res["controller_peak_rss_mib"] = round(hwm, 1)
    if history is not None:
        time.sleep(1)
        res["peak_unready_labels"] = history.peak_unready(t0)
        res["label_events"] = len(history.events)
        with open(os.path.join(out, f"labels-{phase}.jsonl"), "w") as f:
            for ms, name, has in history.events:
                f.write(json.dumps({"unix_ms": ms, "node": name, "ready": has}) + "\n")
    print("json: " + json.dumps(res), flush=True)


if __name__ == "__main__":
    main()

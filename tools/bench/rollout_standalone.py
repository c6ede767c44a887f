"""tools/bench/rollout's driver (standalone mode): the same phases as kube_rollout.py, on a
modules directory and the controller's status file. Prints one JSON line per phase.

  python3 rollout_standalone.py PHASE N CONTROLLER_PID LIMIT_S WORK BIN_DIR
"""
import json, os, subprocess, sys, time
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kube_bench import cpu_rss, wait  # noqa: E402  (neither reads the API server)

MODULE = """apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {{name: drv, namespace: fleet}}
spec:
  selector: {{}}
  moduleLoader:
    container:
      modprobe: {{moduleName: drv}}
      kernelMappings:
        - regexp: '^.*$'
          containerImage: registry.local/drv:{tag}
"""


def write(path, text):
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".new")
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


def policy(work, rollout):
    body = {"apiVersion": "kmodd.io/v1alpha1", "kind": "ModulePolicy",
            "metadata": {"name": "drv-rollout", "namespace": "fleet"},
            "spec": {"moduleName": "drv", "rollout": rollout}}
    # JSON is YAML: a .yaml file, which `rollout undo` may rewrite.
    write(os.path.join(work, "modules", "policy.yaml"), json.dumps(body))


def status(bin_dir, work):
    out = subprocess.run([os.path.join(bin_dir, "kmodd-controller"), "status", "-o", "json",
                          "--status-file", os.path.join(work, "status.yaml")],
                         capture_output=True, text=True, check=True).stdout
    doc = json.loads(out)
    return next((m["status"] for m in doc.get("modules", []) if m["name"] == "drv"), {})




def since_ms(text):
    return int(datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp() * 1000)


def main():
    phase, n, pid, limit, work, bin_dir = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                           float(sys.argv[4]), sys.argv[5], sys.argv[6])
    tags = {"install": "v1", "unpaced": "v2", "paced100": "v3", "paced10": "v4", "halt": "v5"}
    policies = {"paced100": {"maxParallel": "100%"}, "paced10": {"maxParallel": "10%"},
                "halt": {"maxParallel": "10%", "maxFailed": 2}}
    if phase in policies:
        policy(work, policies[phase])
        time.sleep(1.5)  # the directory is read (debounced) before the change
    before = (status(bin_dir, work).get("rollout", {}).get("revision")
              if phase not in ("install", "undo") else None)
    cpu0, _ = cpu_rss(pid)
    t0 = int(time.time() * 1000)
    if phase == "undo":
        subprocess.run([os.path.join(bin_dir, "kmodd-controller"), "rollout", "undo", "fleet/drv",
                        "--modules-dir", os.path.join(work, "modules")], check=True,
                       stdout=subprocess.DEVNULL)
    else:
        write(os.path.join(work, "modules", "module.yaml"), MODULE.format(tag=tags[phase]))

    def rollout_in(want):
        def check():
            r = status(bin_dir, work).get("rollout", {})
            return r if r.get("revision") != before and r.get("phase") in want else None
        return check

    res = {"phase": phase, "nodes": n, "t0_unix_ms": t0}
    if phase in ("install", "unpaced"):
        def settled():
            rows = status(bin_dir, work).get("nodes", [])
            return len(rows) >= n and all(r.get("phase") == "Loaded" and since_ms(r["since"]) >= t0 for r in rows)
        wait(settled, limit, phase)
    elif phase in ("paced100", "paced10"):
        r = wait(rollout_in({"Complete"}), limit, phase)
        res["rollout"] = {k: r.get(k) for k in ("ready", "failed", "waiting")}
    elif phase == "halt":
        wait(rollout_in({"Halted"}), limit, phase)
        time.sleep(3)
        r = status(bin_dir, work)["rollout"]
        res["rollout"] = {k: r.get(k) for k in ("updated", "failed", "waiting", "rolledBack", "message")}
    elif phase == "undo":
        wait(lambda: status(bin_dir, work).get("rollout", {}).get("phase") == "Undone", limit, phase)
        time.sleep(3)
    cpu1, hwm = cpu_rss(pid)
    res["controller_cpu_s"] = round(cpu1 - cpu0, 2)
    res["controller_peak_rss_mib"] = round(hwm, 1)
    print("json: " + json.dumps(res), flush=True)


if __name__ == "__main__":
    main()

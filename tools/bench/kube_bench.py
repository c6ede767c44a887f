"""The Kubernetes-mode benches' side of the API server (tools/bench/kube_ready,
tools/bench/kube_rollout): Nodes and agent tokens made in bulk, the API server's request
counters, a process's CPU and peak RSS, a label watch, and kube_ready's create and delete
phases. Reads KMODD_KUBE_URL, KMODD_KUBE_CA and KMODD_KUBE_TOKEN (tools/kube/start's env).
"""
import http.client, json, os, re, ssl, sys, threading, time, urllib.parse

# Empty when imported only for cpu_rss (tools/bench/rollout_standalone.py).
URL = urllib.parse.urlparse(os.environ.get("KMODD_KUBE_URL", ""))
CTX = ssl.create_default_context(cafile=os.environ.get("KMODD_KUBE_CA") or None)
HDR = {"Authorization": "Bearer " + os.environ.get("KMODD_KUBE_TOKEN", "")}
NS, GROUP = "kmm-demo", "/apis/kmm.sigs.x-k8s.io/v1beta1"
KERNEL = "6.1.0-27-cloud-amd64"

def conn():
    return http.client.HTTPSConnection(URL.hostname, URL.port, context=CTX, timeout=60)

def req(c, method, path, body=None, ctype="application/json", ok=(200, 201)):
    h = dict(HDR)
    if body is not None:
        h["Content-Type"] = ctype
        body = json.dumps(body)
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    if r.status not in ok:
        raise SystemExit(f"{method} {path}: {r.status} {data[:300]!r}")
    return r.status, data

def nodes(n, prefix, tokens):
    """POST n Nodes and PATCH their status.nodeInfo, and for each an agent Pod (never run)
    and a token bound to it (audience kmodd, as the DaemonSet's projected one) written to
    tokens/<node>; 8 threads with a keep-alive each."""
    sa = "/api/v1/namespaces/kmodd-system/serviceaccounts"
    req(conn(), "POST", sa, {"apiVersion": "v1", "kind": "ServiceAccount",
                             "metadata": {"name": "kmodd-agent"}})
    def work(idx):
        c = conn()
        for i in idx:
            name = f"{prefix}{i}"
            req(c, "POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
                "name": name, "labels": {"kubernetes.io/hostname": name, "role": "worker"}}})
            req(c, "PATCH", f"/api/v1/nodes/{name}/status", {"status": {"nodeInfo": {
                "kernelVersion": KERNEL, "bootID": f"boot-{i}", "architecture": "amd64",
                "machineID": "m", "systemUUID": "u", "kubeProxyVersion": "", "kubeletVersion": "",
                "containerRuntimeVersion": "", "operatingSystem": "linux", "osImage": "sim"}}},
                ctype="application/merge-patch+json")
            pod = f"kmodd-agent-{name}"
            req(c, "POST", "/api/v1/namespaces/kmodd-system/pods", {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod}, "spec": {"serviceAccountName": "kmodd-agent",
                "automountServiceAccountToken": False, "nodeName": name,
                "containers": [{"name": "agent", "image": "kmodd/agent"}]}})
            _, data = req(c, "POST", f"{sa}/kmodd-agent/token", {"apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest", "spec": {"audiences": ["kmodd"], "expirationSeconds": 7200,
                "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": pod}}})
            with open(os.path.join(tokens, name), "w") as f:
                f.write(json.loads(data)["status"]["token"])
    t0 = time.time()
    ts = [threading.Thread(target=work, args=(range(k, n, 8),)) for k in range(8)]
    for t in ts: t.start()
    for t in ts: t.join()
    print(f"{n} Nodes created in {time.time() - t0:.1f} s", file=sys.stderr)

METRIC = re.compile(r'^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$')
def counters(c):
    _, data = req(c, "GET", "/metrics")
    out = {}
    for line in data.decode().splitlines():
        m = METRIC.match(line)
        if not m: continue
        lab = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if not lab.get("resource"): continue
        key = (lab["verb"], lab["resource"] + ("/" + lab["subresource"] if lab.get("subresource") else "")
               + ("" if lab.get("code", "200").startswith("2") else f" ({lab['code']})"))
        out[key] = out.get(key, 0) + float(m.group(2))
    return out

def wait(pred, limit, what):
    """pred() every 0.2 s until it is true (returned) or `limit` seconds pass (exit)."""
    end = time.time() + limit
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise SystemExit(f"{what}: not within {limit} s")

def cpu_rss(pid):
    st = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    cpu = (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")
    hwm = next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmHWM"))
    return cpu, hwm / 1024

class Watch(threading.Thread):
    """LIST + WATCH of the Nodes carrying the label; keeps the set of their names."""
    def __init__(self, label):
        super().__init__(daemon=True)
        self.sel = urllib.parse.quote(label)
        self.names, self.cv = set(), threading.Condition()
        c = conn()
        _, data = req(c, "GET", f"/api/v1/nodes?labelSelector={self.sel}")
        d = json.loads(data)
        self.names = {i["metadata"]["name"] for i in d["items"]}
        self.rv = d["metadata"]["resourceVersion"]
    def run(self):
        c = conn(); c.timeout = None
        c.request("GET", f"/api/v1/nodes?watch=1&labelSelector={self.sel}&resourceVersion={self.rv}"
                  "&allowWatchBookmarks=false&timeoutSeconds=600", headers=HDR)
        r = c.getresponse()
        if r.status != 200: raise SystemExit(f"watch: {r.status}")
        while True:
            line = r.readline()
            if not line: break
            ev = json.loads(line)
            name = ev["object"].get("metadata", {}).get("name")
            with self.cv:
                if ev["type"] in ("ADDED", "MODIFIED"): self.names.add(name)
                elif ev["type"] == "DELETED": self.names.discard(name)
                elif ev["type"] == "ERROR": raise SystemExit(f"watch error: {ev}")
                self.cv.notify_all()
    def until(self, pred, limit):
        end = time.time() + limit
        with self.cv:
            while not pred(len(self.names)):
                if time.time() > end: return None
                self.cv.wait(0.05)
        return time.time()

def diff(a, b):
    return {k: b.get(k, 0) - a.get(k, 0) for k in set(a) | set(b) if b.get(k, 0) - a.get(k, 0) > 0}

def writes(d, own):
    # leases: kube-apiserver renews its own identity Lease every 10 s (the controller takes
    # none without --leader-elect)
    w = {f"{v} {r}": int(x) for (v, r), x in d.items()
         if v in ("POST", "PUT", "PATCH", "DELETE") and r != "leases"}
    for k in own:  # the bench's own write succeeded (a failure would have stopped it)
        w[k] -= 1
        if not w[k]: del w[k]
    return dict(sorted(w.items()))

PLUGIN = {"devicePlugin": {"container": {"image": "127.0.0.1:5000/kmm-bench-plugin:1"}},
          "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                           "effect": "NoSchedule"}]} if os.environ.get("PLUGIN") == "1" else {}

def phase(kind, name, n, pid, limit):
    c = conn()
    label = f"kmm.node.kubernetes.io/{NS}.{name}.ready"
    w = Watch(label); w.start()
    time.sleep(0.3)  # the watch is open
    api = int(os.environ["KMODD_KUBE_APISERVER_PID"])
    m0, (cpu0, _), (api0, _) = counters(c), cpu_rss(pid), cpu_rss(api)
    t0 = time.time()
    if kind == "create":
        req(c, "POST", f"{GROUP}/namespaces/{NS}/modules", {
            "apiVersion": "kmm.sigs.x-k8s.io/v1beta1", "kind": "Module",
            "metadata": {"name": name, "namespace": NS},
            "spec": dict({"selector": {"role": "worker"}, "moduleLoader": {"container": {
                "modprobe": {"moduleName": "kmm_bench"},
                "kernelMappings": [{"regexp": "^.+$",
                    "containerImage": "127.0.0.1:5000/kmm-bench:$KERNEL_FULL_VERSION"}]}}},
                **PLUGIN)})
        own = ["POST modules"]
        t_end = w.until(lambda k: k >= n, limit)
        if t_end is None: raise SystemExit(f"create: {len(w.names)}/{n} Nodes ready after {limit} s")
        t_gone = None
    else:
        req(c, "DELETE", f"{GROUP}/namespaces/{NS}/modules/{name}")
        own = ["DELETE modules"]
        t_end = w.until(lambda k: k == 0, limit)
        if t_end is None: raise SystemExit(f"delete: {len(w.names)} Nodes still ready after {limit} s")
        while True:
            st, _ = req(c, "GET", f"{GROUP}/namespaces/{NS}/modules/{name}", ok=(200, 404))
            if st == 404: break
            if time.time() > t0 + limit: raise SystemExit("delete: the Module is still there")
            time.sleep(0.05)
        t_gone = time.time()
    (cpu1, _), (api1, _) = cpu_rss(pid), cpu_rss(api)
    m1 = counters(c)
    # What the controller still writes after the last label (status, Events): until its
    # writes have not moved for 2 s (at most 60 s), so that the settled counts are whole.
    m2, last_change = m1, time.time()
    while time.time() - last_change < 2 and time.time() - t0 < limit + 60:
        time.sleep(0.25)
        m = counters(c)
        if sum(writes(diff(m2, m), []).values()) > 0:
            m2, last_change = m, time.time()
    cpu2, hwm = cpu_rss(pid)
    wr, wr_settled = writes(diff(m0, m1), own), writes(diff(m0, m2), own)
    res = {"phase": kind, "nodes": n, "module": name,
           "all_s": round(t_end - t0, 3), "module_gone_s": round(t_gone - t0, 3) if t_gone else None,
           "writes_done_s": round(last_change - t0, 3),
           "writes": wr, "writes_per_node": round(sum(wr.values()) / n, 2),
           "writes_settled": wr_settled, "writes_per_node_settled": round(sum(wr_settled.values()) / n, 2),
           "controller_cpu_s": round(cpu1 - cpu0, 2), "controller_cpu_s_settled": round(cpu2 - cpu0, 2),
           "controller_peak_rss_mib": round(hwm, 1), "apiserver_cpu_s": round(api1 - api0, 2)}
    print("json: " + json.dumps(res), flush=True)

if __name__ == "__main__":
    if sys.argv[1] == "nodes": nodes(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    else: phase(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))

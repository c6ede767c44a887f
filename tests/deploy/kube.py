#!/usr/bin/python3
"""A small client for the deploy test: render kustomize bases, apply, get, delete.

usage:
  kube.py render DIR [--image NAME=REF@sha256:...]...   print the kustomization in DIR as one
                                                         YAML stream (the subset of kustomize
                                                         deploy/ uses: resources, images)
  kube.py apply FILE [--dry-run] [--skip KIND]...       create every object (server-side
                                                         dry run with --dry-run); exit 1 on any
                                                         refusal, printing the API's message
  kube.py create-one FILE                                create the single object in FILE;
                                                         prints the API's answer, exit 1 if
                                                         refused
  kube.py get PATH                                       GET, print JSON, exit 1 unless 200
  kube.py exists FILE                                    exit 0 iff every object in FILE exists
  kube.py delete FILE [--wait]                           delete every object, in reverse order
  kube.py leftovers FILE                                 list the objects of FILE that exist
  kube.py request METHOD PATH [BODY-JSON] [--as USER]    print status and body

The API server is KMODD_KUBE_URL with KMODD_KUBE_CA and KMODD_KUBE_TOKEN (tools/kube/start).
Only PyYAML (Debian's python3-yaml) beyond the standard library.
"""
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request

import yaml

# kind -> (apiVersion prefix for the URL, plural, namespaced)
RESOURCES = {
    "Namespace": ("api/v1", "namespaces", False),
    "ServiceAccount": ("api/v1", "serviceaccounts", True),
    "Service": ("api/v1", "services", True),
    "ConfigMap": ("api/v1", "configmaps", True),
    "Secret": ("api/v1", "secrets", True),
    "Node": ("api/v1", "nodes", False),
    "CustomResourceDefinition": ("apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False),
    "ClusterRole": ("apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "Deployment": ("apis/apps/v1", "deployments", True),
    "DaemonSet": ("apis/apps/v1", "daemonsets", True),
    "PodDisruptionBudget": ("apis/policy/v1", "poddisruptionbudgets", True),
    "NetworkPolicy": ("apis/networking.k8s.io/v1", "networkpolicies", True),
    "ValidatingWebhookConfiguration": ("apis/admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", False),
    "ValidatingAdmissionPolicy": ("apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicies", False),
    "ValidatingAdmissionPolicyBinding": ("apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings", False),
    "Module": ("apis/kmm.sigs.x-k8s.io/v1beta1", "modules", True),
}


def die(msg):
    print(f"kube.py: {msg}", file=sys.stderr)
    sys.exit(1)


# --- rendering ----------------------------------------------------------------------------

def render(directory, images):
    kfile = os.path.join(directory, "kustomization.yaml")
    with open(kfile) as f:
        k = yaml.safe_load(f)
    unknown = set(k) - {"apiVersion", "kind", "resources", "images"}
    if unknown:
        die(f"{kfile}: this renderer does not know {sorted(unknown)}")
    objs = []
    for r in k.get("resources", []):
        path = os.path.join(directory, r)
        if os.path.isdir(path):
            objs += render(path, {})
        else:
            with open(path) as f:
                objs += [d for d in yaml.safe_load_all(f) if d]
    table = dict(images)
    for entry in k.get("images", []) or []:
        ref = entry.get("newName", entry["name"])
        if "digest" in entry:
            ref += "@" + entry["digest"]
        elif "newTag" in entry:
            ref += ":" + entry["newTag"]
        table.setdefault(entry["name"], ref)
    for o in objs:
        spec = o.get("spec", {}).get("template", {}).get("spec", {})
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            if c.get("image") in table:
                c["image"] = table[c["image"]]
    return objs


# --- the API ------------------------------------------------------------------------------

def context():
    ctx = ssl.create_default_context(cafile=os.environ["KMODD_KUBE_CA"])
    return ctx


def call(method, path, body=None, impersonate=None, content_type="application/json"):
    url = os.environ["KMODD_KUBE_URL"].rstrip("/") + "/" + path.lstrip("/")
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Authorization", "Bearer " + os.environ["KMODD_KUBE_TOKEN"])
    req.add_header("Accept", "application/json")
    if data is not None:
        req.add_header("Content-Type", content_type)
    if impersonate:
        req.add_header("Impersonate-User", impersonate)
    try:
        with urllib.request.urlopen(req, context=context(), timeout=30) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, {"message": raw.decode(errors="replace")}


def paths(obj):
    kind = obj["kind"]
    if kind not in RESOURCES:
        die(f"unknown kind {kind}")
    prefix, plural, namespaced = RESOURCES[kind]
    ns = obj["metadata"].get("namespace", "default") if namespaced else None
    coll = f"/{prefix}/namespaces/{ns}/{plural}" if ns else f"/{prefix}/{plural}"
    return coll, f"{coll}/{obj['metadata']['name']}"


def name(obj):
    ns = obj["metadata"].get("namespace")
    return f"{obj['kind']} {ns + '/' if ns else ''}{obj['metadata']['name']}"


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def apply(objs, dry_run):
    failed = 0
    for o in objs:
        coll, item = paths(o)
        q = "?dryRun=All&fieldValidation=Strict" if dry_run else "?fieldValidation=Strict"
        code, body = call("POST", coll + q, o)
        if code == 409 and not dry_run:
            code, cur = call("GET", item)
            o = dict(o, metadata=dict(o["metadata"], resourceVersion=cur["metadata"]["resourceVersion"]))
            code, body = call("PUT", item + "?fieldValidation=Strict", o)
        if code >= 300:
            print(f"REFUSED {name(o)}: {code} {body.get('message')}", file=sys.stderr)
            failed += 1
        else:
            print(f"{'dry-run ' if dry_run else ''}applied {name(o)}")
    return failed


def main():
    a = sys.argv[1:]
    if not a:
        die(__doc__)
    cmd = a.pop(0)
    if cmd == "render":
        directory = a.pop(0)
        images = {}
        while a:
            if a.pop(0) != "--image":
                die("render: --image NAME=REF")
            n, ref = a.pop(0).split("=", 1)
            images[n] = ref
        print(yaml.safe_dump_all(render(directory, images), sort_keys=False), end="")
    elif cmd == "apply":
        f = a.pop(0)
        dry = "--dry-run" in a
        skip = [a[i + 1] for i, x in enumerate(a) if x == "--skip"]
        objs = [o for o in load(f) if o["kind"] not in skip]
        sys.exit(1 if apply(objs, dry) else 0)
    elif cmd == "create-one":
        (o,) = load(a.pop(0))
        coll, _ = paths(o)
        code, body = call("POST", coll + "?fieldValidation=Strict", o)
        print(json.dumps({"code": code, "body": body}))
        sys.exit(0 if code < 300 else 1)
    elif cmd == "get":
        code, body = call("GET", a.pop(0))
        print(json.dumps(body))
        sys.exit(0 if code == 200 else 1)
    elif cmd in ("exists", "leftovers"):
        left = []
        for o in load(a.pop(0)):
            code, _ = call("GET", paths(o)[1])
            if code == 200:
                left.append(name(o))
            elif code != 404:
                die(f"GET {name(o)}: {code}")
        if cmd == "leftovers":
            print("\n".join(left))
            sys.exit(0)
        total = len(load(sys.argv[2]))
        if len(left) != total:
            die(f"{total - len(left)} of {total} objects missing")
        print(f"all {total} objects exist")
    elif cmd == "delete":
        f = a.pop(0)
        objs = list(reversed(load(f)))
        for o in objs:
            code, body = call("DELETE", paths(o)[1])
            if code not in (200, 202, 404):
                die(f"DELETE {name(o)}: {code} {body.get('message')}")
            print(f"deleted {name(o)}" if code != 404 else f"absent {name(o)}")
        if "--wait" in a:
            deadline = time.time() + 60
            for o in objs:
                while call("GET", paths(o)[1])[0] == 200:
                    if time.time() > deadline:
                        die(f"{name(o)} still there after 60 s")
                    time.sleep(0.2)
    elif cmd == "request":
        method, path = a.pop(0), a.pop(0)
        body = None
        user = None
        while a:
            x = a.pop(0)
            if x == "--as":
                user = a.pop(0)
            else:
                body = json.loads(x)
        ctype = "application/merge-patch+json" if method == "PATCH" else "application/json"
        code, resp = call(method, path, body, impersonate=user, content_type=ctype)
        print(json.dumps({"code": code, "body": resp}))
    else:
        die(f"unknown command {cmd}")


if __name__ == "__main__":
    main()

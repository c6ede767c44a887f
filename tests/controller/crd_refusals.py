#!/usr/bin/python3
"""The Module CRD's rules on the real API server: every Module of CASES is sent to it
(server-side dry run, strict field validation, so the admission webhook runs too but
nothing is stored) and the field paths of its refusal are compared with the Module's
test.kmodd.io/refused-at annotation and with the paths `kmodd-controller validate` named
for it (VALIDATE_ERR, that command's stderr on CASES). Exit 1 on any difference.

usage: crd_refusals.py CASES VALIDATE_ERR
The API server is KMODD_KUBE_URL with KMODD_KUBE_CA and KMODD_KUBE_TOKEN (tools/kube/start).
"""
import collections
import json
import os
import re
import ssl
import sys
import urllib.error
import urllib.request

import yaml


def api_paths(module):
    """The field paths of the API server's refusal of `module`; empty when it accepts it."""
    ns = module["metadata"]["namespace"]
    url = (os.environ["KMODD_KUBE_URL"].rstrip("/") +
           f"/apis/kmm.sigs.x-k8s.io/v1beta1/namespaces/{ns}/modules"
           "?dryRun=All&fieldValidation=Strict")
    req = urllib.request.Request(url, data=json.dumps(module).encode(), method="POST")
    req.add_header("Authorization", "Bearer " + os.environ["KMODD_KUBE_TOKEN"])
    req.add_header("Content-Type", "application/json")
    ctx = ssl.create_default_context(cafile=os.environ["KMODD_KUBE_CA"])
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30):
            return set(), ""
    except urllib.error.HTTPError as e:
        body = json.loads(e.read())
        causes = body.get("details", {}).get("causes", [])
        # Beside schema errors the API server adds a cause without a field ("<nil>": "some
        # validation rules were not checked"): it skips CEL rules then, as kmodd does.
        return ({c.get("field", "") for c in causes} - {"<nil>"}), body.get("message", "")


def validate_paths(path):
    """Module name -> the field paths `validate` reported for it."""
    line = re.compile(r"^error: .*?:\d+: Module [^/]+/([^:]+): (\S+): ")
    out = collections.defaultdict(set)
    with open(path) as f:
        for text in f:
            m = line.match(text)
            if m:
                out[m.group(1)].add(m.group(2))
    return out


def main():
    cases, validate_err = sys.argv[1:3]
    by_validate = validate_paths(validate_err)
    failed = 0
    with open(cases) as f:
        modules = [m for m in yaml.safe_load_all(f) if m]
    for m in modules:
        name = m["metadata"]["name"]
        want = {p.strip() for p in
                m["metadata"]["annotations"]["test.kmodd.io/refused-at"].split(",") if p.strip()}
        got, message = api_paths(m)
        mine = by_validate.get(name, set())
        verdict = "refused at " + ", ".join(sorted(got)) if got else "accepted"
        if got == want == mine:
            print(f"ok: {name}: the API server and validate agree: {verdict}")
            continue
        failed += 1
        print(f"FAIL: {name}: expected {sorted(want)}, the API server {sorted(got)} "
              f"({message}), validate {sorted(mine)}", file=sys.stderr)
    print(f"{len(modules) - failed} of {len(modules)} Modules judged alike")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Writes kmm.sigs.x-k8s.io_modules.yaml (here and in the Helm chart's crds/): the Module
CRD, from the types kmodd decodes and the rules in api/crd_rules.yaml.

The schema mirrors api/module.h field for field (KMM's v1beta1 names), so that
the API server keeps every field kmodd reads. It is structural: every node has a type,
except the Kubernetes sub-objects that kmodd carries without interpreting (env valueFrom,
container resources, volume sources other than hostPath, DRA selector and config contents),
which keep whatever they hold (x-kubernetes-preserve-unknown-fields).

The rules KMM's CRD makes the API server enforce (required fields, minItems, maxItems,
patterns, defaults, the CEL rule that keeps dra and devicePlugin apart) come from
api/crd_rules.yaml, the file kmodd's decoder applies too: this script places
each rule at its path and fails on a path the schema does not have. Semantic rules (a
mapping sets exactly one of regexp and literal, images carry a tag, ...) are the admission
webhook's job, as in KMM.

usage: deploy/crd/generate.py [--check]   (--check: exit 1 if the committed file differs)
Needs PyYAML (Debian's python3-yaml).
"""
import os
import sys

import yaml


def string(desc=None):
    s = {"type": "string"}
    if desc:
        s["description"] = desc
    return s


def boolean(desc=None):
    s = {"type": "boolean"}
    if desc:
        s["description"] = desc
    return s


def integer(fmt="int32", desc=None):
    s = {"type": "integer", "format": fmt}
    if desc:
        s["description"] = desc
    return s


def strings(desc=None):
    s = {"type": "array", "items": {"type": "string"}}
    if desc:
        s["description"] = desc
    return s


def obj(props, desc=None, required=None, preserve=False):
    s = {"type": "object"}
    if desc:
        s["description"] = desc
    s["properties"] = props
    if required:
        s["required"] = required
    if preserve:
        s["x-kubernetes-preserve-unknown-fields"] = True
    return s


def array(items, desc=None):
    s = {"type": "array", "items": items}
    if desc:
        s["description"] = desc
    return s


def string_map(desc):
    return {"type": "object", "description": desc, "additionalProperties": {"type": "string"}}


def opaque_object(desc):
    return {"type": "object", "description": desc, "x-kubernetes-preserve-unknown-fields": True}


def anything(desc):
    # No type: any JSON value is kept as it is (allowed with preserve-unknown-fields).
    return {"description": desc, "x-kubernetes-preserve-unknown-fields": True}


def local_ref(desc):
    # Atomic, as Kubernetes' LocalObjectReference: a server-side apply replaces it whole.
    s = obj({"name": string("Name of the object in the Module's namespace.")}, desc)
    s["x-kubernetes-map-type"] = "atomic"
    return s


def tls(desc):
    return obj({
        "insecure": boolean("Plain HTTP to the registry."),
        "insecureSkipTLSVerify": boolean("HTTPS without verifying the registry's certificate."),
    }, desc)


def build():
    return obj({
        "buildArgs": array(obj({"name": string(), "value": string()}),
                           "Build arguments."),
        "dockerfileConfigMap": local_ref("ConfigMap holding the Dockerfile."),
        "baseImageRegistryTLS": tls("TLS options for the base image's registry."),
        "secrets": array(local_ref(None), "Secrets made available to the build."),
        "kanikoParams": obj({"tag": string("Kaniko image tag.")}, "Kaniko options."),
        "selector": string_map("Node labels for the build pod."),
    }, "In-cluster build options. Decoded and validated; kmodd does not build in the cluster.")


def sign():
    return obj({
        "unsignedImage": string("Image holding the unsigned modules."),
        "unsignedImageRegistryTLS": tls("TLS options for the unsigned image's registry."),
        "keySecret": local_ref("Secret with the private signing key."),
        "certSecret": local_ref("Secret with the public certificate."),
        "filesToSign": strings("Module files to sign, under dirName."),
    }, "In-cluster signing options. Decoded and validated; kmodd does not sign in the cluster.")


def modprobe_args(desc):
    return obj({"load": strings("Arguments when loading."), "unload": strings("Arguments when unloading.")}, desc)


IN_TREE_ONE = string("Deprecated: one in-tree module to remove (use inTreeModulesToRemove).")
IN_TREE_LIST = strings("In-tree modules to remove before loading. An empty list is kept as empty.")


def kernel_mapping():
    return obj({
        "regexp": string("RE2 (Go regexp) pattern searched in the kernel version; exactly one of regexp and literal."),
        "literal": string("Exact kernel version; exactly one of regexp and literal."),
        "containerImage": string("Driver image for the matched kernels; falls back to the container's."),
        "registryTLS": tls("TLS options for this mapping's registry; falls back to the container's."),
        "inTreeModuleToRemove": IN_TREE_ONE,
        "inTreeModulesToRemove": IN_TREE_LIST,
        "build": build(),
        "sign": sign(),
    })


def modprobe():
    return obj({
        "moduleName": string("The kernel module to load."),
        "parameters": strings("Module parameters, name=value."),
        "dirName": string("Root of the driver tree in the image (default /opt; \"\" is the image's root)."),
        "args": modprobe_args("Extra modprobe arguments."),
        "rawArgs": modprobe_args("A full modprobe command line, only without moduleName."),
        "firmwarePath": string("Firmware directory in the image."),
        "modulesLoadingOrder": strings("Modules loaded last to first; the first is moduleName."),
    }, "How the module is loaded.")


def module_loader_container():
    return obj({
        "modprobe": modprobe(),
        "kernelMappings": array(kernel_mapping(), "Kernel version to image; the first match wins."),
        "containerImage": string("Default image for mappings that set none."),
        "imagePullPolicy": string("Always, IfNotPresent (default) or Never."),
        "version": string("Enables ordered upgrades through the version-module node label."),
        "registryTLS": tls("Default TLS options for the mappings' registries."),
        "inTreeModuleToRemove": IN_TREE_ONE,
        "inTreeModulesToRemove": IN_TREE_LIST,
        "build": build(),
        "sign": sign(),
    }, "The module loader: what to load, from which image, for which kernel.")


def common_container():
    return obj({
        "image": string(),
        "imagePullPolicy": string(),
        "command": strings(),
        "args": strings(),
        "env": array(obj({
            "name": string(),
            "value": string(),
            "valueFrom": opaque_object("A Kubernetes EnvVarSource, kept as is."),
        })),
        "resources": opaque_object("Kubernetes ResourceRequirements, kept as is."),
        "volumeMounts": array(obj({
            "name": string(),
            "mountPath": string(),
            "readOnly": boolean(),
            "recursiveReadOnly": string(),
            "subPath": string(),
            "subPathExpr": string(),
            "mountPropagation": string(),
        })),
        "securityContext": opaque_object(
            "A Kubernetes SecurityContext, kept as is; without one the container is privileged."),
        "startupProbe": opaque_object("A Kubernetes Probe, kept as is (not on an initContainer)."),
        "livenessProbe": opaque_object("A Kubernetes Probe, kept as is (not on an initContainer)."),
    }, "A container of the DaemonSet kmodd passes through.")


def volumes():
    return array(obj({
        "name": string(),
        "hostPath": obj({"path": string(), "type": string()}),
    }, "A Kubernetes Volume; sources other than hostPath are kept as is.", preserve=True))


def workload(extra=None):
    props = {
        "container": common_container(),
        "initContainer": common_container(),
        "serviceAccountName": string(),
        "volumes": volumes(),
        "automountServiceAccountToken": boolean(),
    }
    props.update(extra or {})
    return props


def counters(desc):
    return obj({
        "nodesMatchingSelectorNumber": integer(desc="Nodes whose labels match the selector."),
        "desiredNumber": integer(desc="Nodes planned to run it (a kernel mapping matched, the version label allows it)."),
        "availableNumber": integer(desc="Planned nodes whose agent reports it loaded."),
    }, desc)


def schema():
    spec = obj({
        "selector": string_map("Node labels that must all be equal."),
        "tolerations": array(obj({
            "key": string(),
            "operator": string(),
            "value": string(),
            "effect": string(),
            "tolerationSeconds": integer("int64"),
        })),
        "imageRepoSecret": local_ref("Pull secret for the driver images."),
        "imageRebuildTriggerGeneration": integer("int64", "Kept; kmodd has no in-cluster build."),
        "moduleLoader": obj({
            "container": module_loader_container(),
            "serviceAccountName": string(),
        }),
        "devicePlugin": obj(workload(), "A device plugin DaemonSet (decoded and validated)."),
        "dra": obj(workload({
            "driverName": string("A DNS subdomain."),
            "deviceClasses": array(obj({
                "name": string("The DeviceClass's name."),
                "selectors": array(obj({
                    "cel": obj({"expression": string("A CEL expression over the device.")}),
                }), "Kubernetes DeviceSelectors."),
                "config": array(obj({
                    "opaque": obj({
                        "driver": string("The driver the configuration is for."),
                        "parameters": opaque_object("The driver's parameters, kept as is."),
                    }),
                }), "Device configuration for the DRA driver."),
            })),
        }), "A DRA driver DaemonSet (decoded and validated)."),
    }, "What to load where (KMM v1beta1 ModuleSpec).")

    status = obj({
        "moduleLoader": counters("The module loader's node counters."),
        "devicePlugin": counters("The device plugin's node counters."),
        "dra": counters("The DRA driver's node counters."),
        "imageRebuildTriggerGeneration": integer("int64"),
        "conditions": {
            "type": "array",
            "description": "Available (every planned node has it loaded) and Degraded (a planned node failed).",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
            "items": obj({
                "type": string(),
                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "reason": string(),
                "message": string(),
                "observedGeneration": integer("int64"),
                "lastTransitionTime": {"type": "string", "format": "date-time"},
            }, required=["type", "status"]),
        },
        "nodes": {
            "type": "array",
            "description": "kmodd: one row per node the selector matches.",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["node"],
            "items": obj({
                "node": string(),
                "phase": string("Pending, Pulling, Loading, Loaded, Unloading, Failed, Skipped or Unknown."),
                "message": string(),
                "version": string(),
                "imageDigest": string(),
                "since": {"type": "string", "format": "date-time"},
                "connected": {"type": "boolean",
                              "description": "Set (false) only while the node's agent is disconnected."},
            }, required=["node"]),
        },
        "rollout": obj({
            "policy": string("The ModulePolicy (namespace/name) that paces this Module."),
            "revision": string("The Module revision being rolled out (a digest of its spec)."),
            "phase": string("Progressing, Paused, WaitingAfterCanary, Halted, Complete, Undone, NoModule or Settling."),
            "message": string(),
            "nodes": integer("int64", "Nodes the Module selects."),
            "updated": integer("int64", "Nodes sent the revision (updating, Ready or Failed)."),
            "updating": integer("int64"),
            "ready": integer("int64"),
            "failed": integer("int64"),
            "waiting": integer("int64", "Nodes not started: they keep their previous driver."),
            "rolledBack": integer("int64", "Failed nodes sent back to what they ran before."),
            "canaries": strings(),
            "failedNodes": strings("node: why, for the first 20 Failed nodes."),
        }, "kmodd: the rollout, when a ModulePolicy names this Module."),
    }, "Observed state, written by the controller.")

    return obj({
        "apiVersion": string(),
        "kind": string(),
        "metadata": {"type": "object"},
        "spec": spec,
        "status": status,
    }, "A kernel module to load on the nodes that match, KMM's Module.")


RULES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "api",
                     "crd_rules.yaml")
KINDS = ("required", "minItems", "maxItems", "pattern", "default", "exclusive")


def expand(path):
    """'a{,.b}.c' -> ['a.c', 'a.b.c'], as api/crd_rules.cc expands it."""
    open_ = path.find("{")
    if open_ < 0:
        return [path]
    close = path.index("}", open_)
    return [p for alt in path[open_ + 1:close].split(",")
            for p in expand(path[:open_] + alt + path[close + 1:])]


def node_at(root, segments, path):
    node = root
    for seg in segments:
        key, items = (seg[:-2], True) if seg.endswith("[]") else (seg, False)
        props = node.get("properties", {})
        if key not in props:
            sys.exit(f"{RULES}: {path}: the schema has no field {key!r} there")
        node = props[key]
        if items:
            if "items" not in node:
                sys.exit(f"{RULES}: {path}: {key} is not a list")
            node = node["items"]
    return node


def apply_rules(root):
    """Places every rule of crd_rules.yaml in the schema `root` (the Module object)."""
    with open(RULES) as f:
        rules = yaml.safe_load(f)["rules"]
    for rule in rules:
        (kind,) = [k for k in KINDS if k in rule]
        for path in expand(rule["path"]):
            segments = path.split(".")
            parent = node_at(root, segments[:-1], path)
            node = node_at(root, segments, path)
            field = segments[-1]
            if kind == "required":
                parent["required"] = sorted(set(parent.get("required", [])) | {field})
            elif kind == "exclusive":
                a, b = rule["exclusive"]
                node.setdefault("x-kubernetes-validations", []).append(
                    {"rule": f"!(has(self.{a}) && has(self.{b}))", "message": rule["message"]})
            else:
                node[kind] = rule[kind]


def crd():
    columns = [
        ("Module", ".spec.moduleLoader.container.modprobe.moduleName", "string", 0),
        ("Version", ".spec.moduleLoader.container.version", "string", 1),
        ("Matching", ".status.moduleLoader.nodesMatchingSelectorNumber", "integer", 1),
        ("Desired", ".status.moduleLoader.desiredNumber", "integer", 0),
        ("Available", ".status.moduleLoader.availableNumber", "integer", 0),
        ("Degraded", '.status.conditions[?(@.type=="Degraded")].status', "string", 0),
        ("Age", ".metadata.creationTimestamp", "date", 0),
    ]
    root = schema()
    apply_rules(root)
    printer = []
    for name, path, typ, prio in columns:
        c = {"name": name, "type": typ, "jsonPath": path}
        if prio:
            c["priority"] = prio
        printer.append(c)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": "modules.kmm.sigs.x-k8s.io",
            "labels": {"app.kubernetes.io/name": "kmodd", "app.kubernetes.io/component": "crd"},
        },
        "spec": {
            "group": "kmm.sigs.x-k8s.io",
            "scope": "Namespaced",
            "names": {"plural": "modules", "singular": "module", "kind": "Module", "listKind": "ModuleList"},
            "versions": [{
                "name": "v1beta1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": printer,
                "schema": {"openAPIV3Schema": root},
            }],
        },
    }


def seconds(desc, minimum=0):
    return {"type": "integer", "format": "int64", "minimum": minimum, "maximum": 86400,
            "description": desc}


def policy_crd():
    """The ModulePolicy CRD (kmodd.io/v1alpha1): api/module_policy.h."""
    # IntOrString as Kubernetes spells it (nothing more is structural); the webhook checks
    # the value (api/module_policy.cc).
    amount = lambda desc: {"x-kubernetes-int-or-string": True, "description": desc,
                           "anyOf": [{"type": "integer"}, {"type": "string"}]}
    spec = obj({
        "moduleName": {"type": "string", "maxLength": 253, "minLength": 1,
                       "description": "The Module (in this namespace) whose rollouts this policy paces."},
        "paused": boolean("No node is started on a new revision while set (`kmodd-controller rollout pause`)."),
        "rollout": obj({
            "maxParallel": amount("Nodes updating at once: a count or a percentage of the selected nodes (default: all)."),
            "maxFailed": amount("Failed nodes the rollout tolerates; more halt it (default: no budget)."),
            "canary": obj({
                "count": {"type": "integer", "format": "int64", "minimum": 0,
                          "description": "The first N nodes in rollout order (by name)."},
                "selector": string_map("The nodes with these labels (instead of count)."),
                "pause": boolean("Wait for `rollout resume` once the canaries are Ready (default true)."),
                "soakSeconds": {"type": "integer", "format": "int64", "minimum": 0, "maximum": 2592000,
                                "description": "Go on by itself once the canaries were Ready this long."},
            }, "The nodes that take a new revision first."),
            "onFailure": {"type": "string", "enum": ["Rollback", "Leave"],
                          "description": "Rollback (default): a Failed node goes back to what it ran before; Leave: it stays for inspection."},
        }, "How a change of the Module reaches its nodes."),
        "drain": obj({
            "cordon": boolean("Mark the node unschedulable first (default true); uncordoned once Ready again, unless someone else had cordoned it."),
            "resources": strings("Evict the Pods on the node that request one of these extended resources (a device plugin's, e.g. example.com/gpu)."),
            "podSelector": string_map("And the Pods on the node that carry these labels."),
            "timeoutSeconds": seconds("How long to wait for them to leave (default 300).", 1),
            "onTimeout": {"type": "string", "enum": ["Fail", "Proceed"],
                          "description": "Fail (default): the node keeps its driver and counts as Failed; Proceed: its driver is replaced anyway."},
        }, "Kubernetes mode: drain the node's device users through the Eviction API before its driver is replaced or removed."),
        "readiness": obj({
            "checks": {
                "type": "array", "maxItems": 16,
                "description": "What must hold on a node once the modules are loaded before it is Ready; run by the agent (api/readiness.h).",
                "items": obj({
                    "name": {"type": "string", "minLength": 1, "maxLength": 63,
                             "description": "Names the check in the node's status and in Events."},
                    "timeoutSeconds": seconds("path, devices, stable: the check fails if it has not passed by then (default 60).", 1),
                    "path": obj({
                        "path": string("A file or directory under /sys or /proc."),
                        "equals": string("Its content, trailing newlines ignored."),
                        "contains": string("A substring of its content."),
                    }, "Passes once the path exists (with the content, if given).", required=["path"]),
                    "devices": obj({
                        "glob": string("Device nodes under /dev (fnmatch), as udev lists them."),
                        "count": {"type": "integer", "format": "int64", "minimum": 1, "maximum": 4096,
                                  "description": "At least this many (default 1)."},
                    }, "Passes once enough device nodes match.", required=["glob"]),
                    "kernelLog": obj({
                        "pattern": string("An RE2 pattern; a matching kernel log line since the load fails the check."),
                        "seconds": seconds("How long after the load to watch (default 10)."),
                    }, "Fails on a matching kernel log line; passes after its window.", required=["pattern"]),
                    "stable": obj({
                        "path": string("A file under /sys or /proc (a refcount, an attribute)."),
                        "seconds": seconds("How long its value must stay unchanged.", 1),
                    }, "Passes once the value stayed unchanged this long.", required=["path", "seconds"]),
                }, "One check: a name and exactly one of path, devices, kernelLog, stable.", required=["name"]),
            },
        }, "When a node counts as Ready for the Module (default: when its modules are loaded)."),
    }, "How the named Module's changes reach the fleet.", required=["moduleName"])
    root = obj({
        "apiVersion": string(),
        "kind": string(),
        "metadata": {"type": "object"},
        "spec": spec,
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    }, "kmodd's rollout policy for one KMM Module.", required=["spec"])
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": "modulepolicies.kmodd.io",
            "labels": {"app.kubernetes.io/name": "kmodd", "app.kubernetes.io/component": "crd"},
        },
        "spec": {
            "group": "kmodd.io",
            "scope": "Namespaced",
            "names": {"plural": "modulepolicies", "singular": "modulepolicy", "kind": "ModulePolicy",
                      "listKind": "ModulePolicyList"},
            "versions": [{
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Module", "type": "string", "jsonPath": ".spec.moduleName"},
                    {"name": "MaxParallel", "type": "string", "jsonPath": ".spec.rollout.maxParallel"},
                    {"name": "Paused", "type": "boolean", "jsonPath": ".spec.paused"},
                ],
                "schema": {"openAPIV3Schema": root},
            }],
        },
    }


POLICY_HEADER = """\
# The ModulePolicy CRD (kmodd.io/v1alpha1): kmodd's rollout policy for a KMM Module.
# Generated by deploy/crd/generate.py (policy_crd): edit that, not this file.
"""


PFV_HEADER = """\
# The PreflightValidation CRD (kmm.sigs.x-k8s.io/v1beta2, KMM's): does every Module have a
# working driver for a kernel? Served by kmodd-controller in Kubernetes mode.
# Generated by deploy/crd/generate.py (pfv_crd): edit that, not this file.
"""


HEADER = """\
# The Module CRD (kmm.sigs.x-k8s.io/v1beta1), as kmodd reads it.
# Generated by deploy/crd/generate.py from the types in api/module.h and the
# rules in api/crd_rules.yaml: edit those, not this file (the deploy test and
# tests/api/crd_rules_test.cc check that they agree).
"""


def pfv_crd():
    # KMM's api/v1beta2/preflightvalidation_types.go, served as v1beta2 (kmodd has no v1beta1
    # conversion webhook: KMM's v1beta1 is deprecated).
    status_entry = obj({
        "namespace": string("The Module's namespace."),
        "name": string("The Module's name."),
        "verificationStatus": dict(string("Success, Failure, or InProgress while it is checked."),
                                   enum=["Success", "Failure", "InProgress"]),
        "verificationStage": dict(string("Image until the check is done, then Done (KMM's stages); "
                                         "kmodd's own stage (Mapping, Image, Content) begins statusReason."),
                                  enum=["Image", "Done"]),
        "statusReason": string("What the check found."),
        "lastTransitionTime": dict(string("When verificationStatus, verificationStage or statusReason last changed."),
                                   format="date-time"),
    }, required=["name", "namespace", "verificationStatus", "verificationStage", "lastTransitionTime"])
    root = obj({
        "apiVersion": string(),
        "kind": string(),
        "metadata": {"type": "object"},
        "spec": obj({
            "kernelVersion": string("The kernel the fleet moves to, as `uname -r` prints it."),
            "pushBuiltImage": boolean("KMM: push images built for the check. kmodd builds none: read, no effect."),
        }, required=["kernelVersion"]),
        "status": obj({
            "modules": dict(array(status_entry, "One entry per Module: does it have a working driver for the kernel?"),
                            **{"x-kubernetes-list-type": "map",
                               "x-kubernetes-list-map-keys": ["namespace", "name"]}),
        }),
    }, required=["spec"])
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": "preflightvalidations.kmm.sigs.x-k8s.io",
            "labels": {"app.kubernetes.io/name": "kmodd", "app.kubernetes.io/component": "crd"},
        },
        "spec": {
            "group": "kmm.sigs.x-k8s.io",
            "scope": "Cluster",
            "names": {"plural": "preflightvalidations", "singular": "preflightvalidation",
                      "kind": "PreflightValidation", "listKind": "PreflightValidationList",
                      "shortNames": ["pfv"]},
            "versions": [{
                "name": "v1beta2",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Kernel", "type": "string", "jsonPath": ".spec.kernelVersion"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
                "schema": {"openAPIV3Schema": root},
            }],
        },
    }


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    # The kustomize base's copy and the Helm chart's (Helm installs crds/ before the rest).
    paths = [os.path.join(here, "kmm.sigs.x-k8s.io_modules.yaml"),
             os.path.join(here, "..", "helm", "kmodd", "crds", "kmm.sigs.x-k8s.io_modules.yaml")]
    text = HEADER + yaml.safe_dump(crd(), sort_keys=False, width=100, default_flow_style=False)
    policy_text = POLICY_HEADER + yaml.safe_dump(policy_crd(), sort_keys=False, width=100,
                                                 default_flow_style=False)
    policy_paths = [os.path.join(here, "kmodd.io_modulepolicies.yaml"),
                    os.path.join(here, "..", "helm", "kmodd", "crds", "kmodd.io_modulepolicies.yaml")]
    pfv_text = PFV_HEADER + yaml.safe_dump(pfv_crd(), sort_keys=False, width=100,
                                           default_flow_style=False)
    pfv_paths = [os.path.join(here, "kmm.sigs.x-k8s.io_preflightvalidations.yaml"),
                 os.path.join(here, "..", "helm", "kmodd", "crds", "kmm.sigs.x-k8s.io_preflightvalidations.yaml")]
    files = ([(p, text) for p in paths] + [(p, policy_text) for p in policy_paths] +
             [(p, pfv_text) for p in pfv_paths])
    if sys.argv[1:] == ["--check"]:
        for path, text in files:
            if not os.path.exists(path):
                print(f"{path} is missing: run deploy/crd/generate.py", file=sys.stderr)
                sys.exit(1)
            with open(path) as f:
                if f.read() != text:
                    print(f"{path} is out of date: run deploy/crd/generate.py", file=sys.stderr)
                    sys.exit(1)
        return
    if sys.argv[1:]:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    for path, text in files:
        with open(path, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()

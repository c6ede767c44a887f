#include "controller/kube_mode/plugin_daemonset.h"

#include <catch2/catch.hpp>

#include <string>

#include "common/json.h"
#include "tests/controller/kube_mode/module_fixtures.h"

using kmodd::Lookup;
using kmodd::StringAt;
using kmodd::Value;
using kmodd::server::DaemonSetVersion;
using kmodd::server::DevicePluginDaemonSet;

namespace {

using kmodd::testing::CheckMountsAreValid;
using kmodd::testing::Json;

kmodd::api::Module Decode(const std::string& spec) { return kmodd::testing::DecodeModule(spec); }

Value Build(const std::string& spec) {
  absl::StatusOr<Value> ds = DevicePluginDaemonSet(Decode(spec));
  INFO(ds.status().ToString());
  REQUIRE(ds.ok());
  return *ds;
}

}  // namespace

TEST_CASE("the device plugin DaemonSet is KMM's, field for field") {
  const Value ds = Build(R"(spec:
  selector: {gpu: "true"}
  imageRepoSecret: {name: pull}
  tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule, tolerationSeconds: 30}]
  moduleLoader:
    container:
      modprobe: {moduleName: gpu}
      kernelMappings: [{regexp: '^.+$', containerImage: 'reg/gpu:$KERNEL_FULL_VERSION'}]
  devicePlugin:
    serviceAccountName: dp
    automountServiceAccountToken: false
    initContainer: {image: 'reg/init:1', command: [sh, -c, 'ls /dev']}
    container:
      image: reg/plugin:1
      args: [--x]
      imagePullPolicy: Always
      env: [{name: A, value: "1"}, {name: B, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]
      volumeMounts: [{name: dev, mountPath: /dev, readOnly: true}]
      resources: {limits: {cpu: 100m}}
    volumes:
      - {name: dev, hostPath: {path: /dev, type: Directory}}
      - {name: cfg, configMap: {name: plugin-config}}
)");
  const Value want = Json(R"({
    "apiVersion": "apps/v1", "kind": "DaemonSet",
    "metadata": {
      "namespace": "drivers", "generateName": "gpu-device-plugin-",
      "labels": {"kmm.node.kubernetes.io/module.name": "gpu", "kmm.node.kubernetes.io/role": "device-plugin"},
      "ownerReferences": [{"apiVersion": "kmm.sigs.x-k8s.io/v1beta1", "kind": "Module", "name": "gpu",
                           "uid": "0c0ffee0-0000-4000-8000-000000000001", "controller": true,
                           "blockOwnerDeletion": true}]},
    "spec": {
      "selector": {"matchLabels": {"kmm.node.kubernetes.io/module.name": "gpu",
                                   "kmm.node.kubernetes.io/role": "device-plugin"}},
      "template": {
        "metadata": {"labels": {"kmm.node.kubernetes.io/module.name": "gpu",
                                "kmm.node.kubernetes.io/role": "device-plugin"}},
        "spec": {
          "initContainers": [{"name": "device-plugin-init", "image": "reg/init:1",
                              "command": ["sh", "-c", "ls /dev"],
                              "securityContext": {"privileged": true}}],
          "containers": [{"name": "device-plugin", "image": "reg/plugin:1", "args": ["--x"],
                          "env": [{"name": "A", "value": "1"},
                                  {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                          "imagePullPolicy": "Always",
                          "resources": {"limits": {"cpu": "100m"}},
                          "securityContext": {"privileged": true},
                          "volumeMounts": [
                            {"name": "kubelet-device-plugins", "mountPath": "/var/lib/kubelet/device-plugins"},
                            {"name": "dev", "mountPath": "/dev", "readOnly": true}]}],
          "priorityClassName": "system-node-critical",
          "imagePullSecrets": [{"name": "pull"}],
          "nodeSelector": {"kmm.node.kubernetes.io/drivers.gpu.device-plugin-target": "",
                           "kmm.node.kubernetes.io/drivers.gpu.ready": ""},
          "serviceAccountName": "dp",
          "volumes": [
            {"name": "kubelet-device-plugins",
             "hostPath": {"path": "/var/lib/kubelet/device-plugins", "type": "Directory"}},
            {"name": "dev", "hostPath": {"path": "/dev", "type": "Directory"}},
            {"name": "cfg", "configMap": {"name": "plugin-config"}}],
          "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu",
                           "effect": "NoSchedule", "tolerationSeconds": 30}],
          "automountServiceAccountToken": false}}}})");
  CHECK(kmodd::ToJsonLine(ds) == kmodd::ToJsonLine(want));
  CheckMountsAreValid(ds);
  CHECK(DaemonSetVersion(ds, Decode("spec: {selector: {}}")).empty());
}

TEST_CASE("the device plugin DaemonSet of a versioned Module belongs to that version") {
  const Value ds = Build(kmodd::testing::VersionedLoader("v2") + "  devicePlugin: {container: {image: 'reg/plugin:2'}}\n");
  const std::string label = "beta.kmm.node.kubernetes.io/version-schedule-pod.drivers.gpu";
  CHECK(StringAt(ds, {"metadata", "labels", label}) == "v2");
  CHECK(StringAt(ds, {"spec", "selector", "matchLabels", label}) == "v2");
  CHECK(StringAt(ds, {"spec", "template", "spec", "nodeSelector", label}) == "v2");
  CHECK(Lookup(ds, {"spec", "template", "spec", "nodeSelector",
                    "kmm.node.kubernetes.io/drivers.gpu.ready"}) != nullptr);
  CHECK(DaemonSetVersion(ds, Decode("spec: {selector: {}}")) == "v2");
}

TEST_CASE("the device plugin of an in-tree driver (no moduleLoader) runs on spec.selector") {
  const Value ds = Build(R"(spec:
  selector: {feature.node.kubernetes.io/pci-10de.present: "true"}
  devicePlugin: {container: {image: 'reg/plugin:1'}}
)");
  const Value* selector = Lookup(ds, {"spec", "template", "spec", "nodeSelector"});
  REQUIRE(selector != nullptr);
  CHECK(kmodd::ToJsonLine(*selector) == R"({"feature.node.kubernetes.io/pci-10de.present":"true"})");
}

TEST_CASE("the Module's securityContext and probes replace KMM's privileged default") {
  const Value ds = Build(R"(spec:
  selector: {}
  devicePlugin:
    container:
      image: reg/plugin:1
      securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
      startupProbe: {exec: {command: [test, -S, /var/lib/kubelet/device-plugins/p.sock]}, failureThreshold: 60}
      livenessProbe: {grpc: {port: 51515, service: liveness}, periodSeconds: 10}
)");
  const Value* c = Lookup(ds, {"spec", "template", "spec", "containers"});
  REQUIRE(c != nullptr);
  const Value& main = c->AsList().at(0);
  CHECK(kmodd::ToJsonLine(*main.Find("securityContext")) ==
        R"({"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}})");
  CHECK(kmodd::IntAt(main, {"startupProbe", "failureThreshold"}) == 60);
  CHECK(kmodd::IntAt(main, {"livenessProbe", "grpc", "port"}) == 51515);
}

TEST_CASE("a user mount at the device-plugins path replaces kmodd's, and the Pod stays valid") {
  // KMM appends its own mount and the user's: the API server refuses the DaemonSet with
  // "mountPath: Invalid value: \"/var/lib/kubelet/device-plugins\": must be unique".
  const Value ds = Build(R"(spec:
  selector: {}
  devicePlugin:
    container:
      image: reg/plugin:1
      volumeMounts: [{name: plugins, mountPath: /var/lib/kubelet/device-plugins/}]
    volumes: [{name: plugins, hostPath: {path: /var/lib/kubelet/device-plugins}}]
)");
  CheckMountsAreValid(ds);
  const Value* mounts = Lookup(ds, {"spec", "template", "spec", "containers"});
  REQUIRE(mounts != nullptr);
  CHECK(kmodd::ToJsonLine(*mounts->AsList().at(0).Find("volumeMounts")) ==
        R"([{"name":"plugins","mountPath":"/var/lib/kubelet/device-plugins/"}])");
  CHECK(kmodd::ToJsonLine(*Lookup(ds, {"spec", "template", "spec", "volumes"})) ==
        R"([{"name":"plugins","hostPath":{"path":"/var/lib/kubelet/device-plugins"}}])");
}

TEST_CASE("a user volume named as kmodd's leaves kmodd's under another name") {
  const Value ds = Build(R"(spec:
  selector: {}
  devicePlugin:
    container:
      image: reg/plugin:1
      volumeMounts: [{name: kubelet-device-plugins, mountPath: /config}]
    volumes: [{name: kubelet-device-plugins, configMap: {name: cfg}}]
)");
  CheckMountsAreValid(ds);
  const Value& volumes = *Lookup(ds, {"spec", "template", "spec", "volumes"});
  REQUIRE(volumes.AsList().size() == 2);
  CHECK(StringAt(volumes.AsList()[0], {"name"}) == "kubelet-device-plugins-0");
  CHECK(StringAt(volumes.AsList()[0], {"hostPath", "path"}) == "/var/lib/kubelet/device-plugins");
  CHECK(StringAt(volumes.AsList()[1], {"name"}) == "kubelet-device-plugins");
}

TEST_CASE("a Module without spec.devicePlugin has no device plugin DaemonSet") {
  absl::StatusOr<Value> ds = DevicePluginDaemonSet(Decode("spec: {selector: {}}"));
  REQUIRE_FALSE(ds.ok());
  CHECK(ds.status().message() == "Module drivers/gpu has no spec.devicePlugin");
}

#include "controller/kube_mode/dra_daemonset.h"

#include <catch2/catch.hpp>

#include <string>

#include "common/json.h"
#include "controller/kube_mode/module_daemonset.h"
#include "tests/controller/kube_mode/module_fixtures.h"

using kmodd::Lookup;
using kmodd::StringAt;
using kmodd::ToJsonLine;
using kmodd::Value;
using kmodd::server::DaemonSetVersion;
using kmodd::server::DraDaemonSet;
using kmodd::testing::CheckMountsAreValid;
using kmodd::testing::DecodeModule;
using kmodd::testing::Json;

namespace {

Value Build(const std::string& spec) {
  absl::StatusOr<Value> ds = DraDaemonSet(DecodeModule(spec));
  INFO(ds.status().ToString());
  REQUIRE(ds.ok());
  return *ds;
}

const Value& MainContainer(const Value& ds) {
  const Value* c = Lookup(ds, {"spec", "template", "spec", "containers"});
  REQUIRE(c != nullptr);
  REQUIRE(c->AsList().size() == 1);
  return c->AsList()[0];
}

// The DRA spec of a Module without a moduleLoader, `container` its container's fields.
std::string InTree(const std::string& container, const std::string& more = "") {
  return "spec:\n  selector: {gpu: \"true\"}\n  dra:\n    driverName: gpu.example.com\n"
         "    container: {image: reg/dra:1" + container + "}\n" + more;
}

}  // namespace

TEST_CASE("the DRA driver DaemonSet is KMM's, field for field") {
  const Value ds = Build(R"(spec:
  selector: {gpu: "true"}
  imageRepoSecret: {name: pull}
  tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}]
  moduleLoader:
    container:
      modprobe: {moduleName: gpu}
      kernelMappings: [{regexp: '^.+$', containerImage: 'reg/gpu:$KERNEL_FULL_VERSION'}]
  dra:
    driverName: gpu.example.com
    serviceAccountName: dra
    automountServiceAccountToken: true
    initContainer: {image: 'reg/init:1', command: [sh, -c, 'ls /dev']}
    container:
      image: reg/dra:1
      args: [--x]
      env: [{name: A, value: "1"}]
      volumeMounts: [{name: dev, mountPath: /dev}]
    volumes: [{name: dev, hostPath: {path: /dev, type: Directory}}]
    deviceClasses: [{name: gpu.example.com}]
)");
  // What the device plugin's DaemonSet shares (ownerReferences, the selector and the Pods'
  // labels as the DaemonSet's) is checked field for field in plugin_daemonset_test.
  CHECK(StringAt(ds, {"metadata", "generateName"}) == "gpu-dra-");
  CHECK(ToJsonLine(*Lookup(ds, {"spec", "template", "metadata", "labels"})) ==
        R"({"kmm.node.kubernetes.io/module.name":"gpu","kmm.node.kubernetes.io/role":"dra"})");
  const Value& owner = Lookup(ds, {"metadata", "ownerReferences"})->AsList().at(0);
  CHECK(StringAt(owner, {"kind"}) + "/" + StringAt(owner, {"name"}) == "Module/gpu");
  CHECK(owner.Find("controller")->AsBool());
  const Value want = Json(R"({
          "initContainers": [{"name": "dra-init", "image": "reg/init:1",
                              "command": ["sh", "-c", "ls /dev"],
                              "securityContext": {"privileged": true}}],
          "containers": [{"name": "dra", "image": "reg/dra:1", "args": ["--x"],
                          "env": [
                            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                            {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
                            {"name": "CDI_ROOT", "value": "/var/run/cdi"},
                            {"name": "KUBELET_REGISTRAR_DIRECTORY_PATH", "value": "/var/lib/kubelet/plugins_registry/"},
                            {"name": "KUBELET_PLUGINS_DIRECTORY_PATH", "value": "/var/lib/kubelet/plugins/"},
                            {"name": "HEALTHCHECK_PORT", "value": "51515"},
                            {"name": "A", "value": "1"}],
                          "securityContext": {"privileged": true},
                          "livenessProbe": {"grpc": {"port": 51515, "service": "liveness"},
                                            "initialDelaySeconds": 30, "periodSeconds": 10,
                                            "timeoutSeconds": 5, "failureThreshold": 3},
                          "volumeMounts": [
                            {"name": "kubelet-plugins", "mountPath": "/var/lib/kubelet/plugins/"},
                            {"name": "kubelet-plugins-registry", "mountPath": "/var/lib/kubelet/plugins_registry/"},
                            {"name": "cdi", "mountPath": "/var/run/cdi"},
                            {"name": "dev", "mountPath": "/dev"}]}],
          "hostNetwork": true,
          "priorityClassName": "system-node-critical",
          "imagePullSecrets": [{"name": "pull"}],
          "nodeSelector": {"kmm.node.kubernetes.io/drivers.gpu.dra-target": "",
                           "kmm.node.kubernetes.io/drivers.gpu.ready": ""},
          "serviceAccountName": "dra",
          "volumes": [
            {"name": "kubelet-plugins",
             "hostPath": {"path": "/var/lib/kubelet/plugins/", "type": "DirectoryOrCreate"}},
            {"name": "kubelet-plugins-registry",
             "hostPath": {"path": "/var/lib/kubelet/plugins_registry/", "type": "Directory"}},
            {"name": "cdi", "hostPath": {"path": "/var/run/cdi", "type": "DirectoryOrCreate"}},
            {"name": "dev", "hostPath": {"path": "/dev", "type": "Directory"}}],
          "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu",
                           "effect": "NoSchedule"}],
          "automountServiceAccountToken": true})");
  CHECK(ToJsonLine(*Lookup(ds, {"spec", "template", "spec"})) == ToJsonLine(want));
  CheckMountsAreValid(ds);
}

TEST_CASE("the DRA driver of a versioned Module belongs to that version and waits for .ready and kmodd's .dra-target") {
  const Value ds = Build(kmodd::testing::VersionedLoader("v2") + "  dra: {driverName: gpu.example.com, container: {image: 'reg/dra:2'}}\n");
  const std::string label = "beta.kmm.node.kubernetes.io/version-schedule-pod.drivers.gpu";
  CHECK(StringAt(ds, {"metadata", "labels", label}) == "v2");
  CHECK(StringAt(ds, {"spec", "selector", "matchLabels", label}) == "v2");
  CHECK(ToJsonLine(*Lookup(ds, {"spec", "template", "spec", "nodeSelector"})) ==
        R"({"beta.kmm.node.kubernetes.io/version-schedule-pod.drivers.gpu":"v2",)"
        R"("kmm.node.kubernetes.io/drivers.gpu.dra-target":"",)"
        R"("kmm.node.kubernetes.io/drivers.gpu.ready":""})");
  CHECK(DaemonSetVersion(ds, DecodeModule("spec: {selector: {}}")) == "v2");
}

TEST_CASE("the DRA driver of an in-tree driver (no moduleLoader) runs on spec.selector") {
  const Value ds = Build(InTree(""));
  CHECK(ToJsonLine(*Lookup(ds, {"spec", "template", "spec", "nodeSelector"})) ==
        R"({"gpu":"true"})");
  CHECK(Lookup(ds, {"spec", "template", "spec", "initContainers"}) == nullptr);
}

TEST_CASE("a user variable named as a DRA preset replaces it, in the user's place") {
  const Value ds = Build(InTree(", env: [{name: HEALTHCHECK_PORT, value: '6000'}, "
                                "{name: NODE_NAME, value: fixed}]"));
  std::string env;
  for (const Value& e : MainContainer(ds).Find("env")->AsList()) {
    env += StringAt(e, {"name"}) + "=" + StringAt(e, {"value"}) + ";";
  }
  CHECK(env ==
        "POD_UID=;CDI_ROOT=/var/run/cdi;"
        "KUBELET_REGISTRAR_DIRECTORY_PATH=/var/lib/kubelet/plugins_registry/;"
        "KUBELET_PLUGINS_DIRECTORY_PATH=/var/lib/kubelet/plugins/;"
        "HEALTHCHECK_PORT=6000;NODE_NAME=fixed;");
}

TEST_CASE("the user's livenessProbe and securityContext replace the DRA defaults") {
  const Value ds = Build(InTree(", livenessProbe: {httpGet: {path: /healthz, port: 8080}}, "
                                "securityContext: {capabilities: {add: [SYS_ADMIN]}}"));
  const Value& main = MainContainer(ds);
  CHECK(ToJsonLine(*main.Find("livenessProbe")) == R"({"httpGet":{"path":"/healthz","port":8080}})");
  CHECK(ToJsonLine(*main.Find("securityContext")) == R"({"capabilities":{"add":["SYS_ADMIN"]}})");
}

TEST_CASE("a user mount at a DRA preset path replaces kmodd's, and the Pod stays valid") {
  const Value ds = Build(InTree(", volumeMounts: [{name: cdi, mountPath: /var/run/cdi/}, "
                                "{name: plugins, mountPath: /var/lib/kubelet/plugins}]",
                                "    volumes: [{name: cdi, hostPath: {path: /etc/cdi}}, "
                                "{name: plugins, hostPath: {path: /var/lib/kubelet/plugins}}]\n"));
  CheckMountsAreValid(ds);
  std::string mounts;
  for (const Value& m : MainContainer(ds).Find("volumeMounts")->AsList()) {
    mounts += StringAt(m, {"name"}) + ":" + StringAt(m, {"mountPath"}) + ";";
  }
  CHECK(mounts ==
        "kubelet-plugins-registry:/var/lib/kubelet/plugins_registry/;"
        "cdi:/var/run/cdi/;plugins:/var/lib/kubelet/plugins;");
  std::string volumes;
  for (const Value& v : Lookup(ds, {"spec", "template", "spec", "volumes"})->AsList()) {
    volumes += StringAt(v, {"name"}) + ":" + StringAt(v, {"hostPath", "path"}) + ";";
  }
  CHECK(volumes ==
        "kubelet-plugins-registry:/var/lib/kubelet/plugins_registry/;"
        "cdi:/etc/cdi;plugins:/var/lib/kubelet/plugins;");
}

TEST_CASE("a Module without spec.dra has no DRA DaemonSet") {
  absl::StatusOr<Value> ds = DraDaemonSet(DecodeModule("spec: {selector: {}}"));
  REQUIRE_FALSE(ds.ok());
  CHECK(ds.status().message() == "Module drivers/gpu has no spec.dra");
}

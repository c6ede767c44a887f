#include <catch2/catch.hpp>

#include "tools/agentctl/module_file.h"

namespace kmodd::agentctl {
namespace {

TEST_CASE("load reads a bare NodeModulesConfig module entry") {
  auto m = ParseModuleFile(R"(name: fast-nvme
namespace: storage
version: "2.1"
config:
  kernelVersion: 6.1.0-27-cloud-amd64
  containerImage: registry.example.com/storage/fast-nvme:2.1
  imagePullPolicy: IfNotPresent
  modprobe:
    moduleName: fast_nvme
    parameters: [queues=4]
    modulesLoadingOrder: [fast_nvme, nvme_core]
)",
                           "entry.yaml");
  REQUIRE(m.ok());
  REQUIRE(m->size() == 1);
  const v1::ModuleSpec& s = m->front();
  CHECK(s.namespace_() == "storage");
  CHECK(s.name() == "fast-nvme");
  CHECK(s.version() == "2.1");
  CHECK(s.kernel_version() == "6.1.0-27-cloud-amd64");
  CHECK(s.container_image() == "registry.example.com/storage/fast-nvme:2.1");
  CHECK(s.modprobe().module_name() == "fast_nvme");
  CHECK(s.modprobe().parameters(0) == "queues=4");
  CHECK(s.modprobe().has_modules_loading_order());
  CHECK(s.modprobe().modules_loading_order_size() == 2);
}

TEST_CASE("load reads every module of NodeModulesConfig documents, in order") {
  auto m = ParseModuleFile(R"(apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: NodeModulesConfig
metadata: {name: worker-1}
spec:
  modules:
    - name: a
      namespace: ns
      config: {kernelVersion: "6.1", containerImage: "r/a:1", modprobe: {moduleName: a}}
    - name: b
      namespace: ns
      config: {kernelVersion: "6.1", containerImage: "r/b:1", modprobe: {moduleName: b}}
)",
                           "nmc.yaml");
  REQUIRE(m.ok());
  REQUIRE(m->size() == 2);
  CHECK((*m)[0].name() == "a");
  CHECK((*m)[1].name() == "b");
}

TEST_CASE("load refuses an entry the agent would refuse, naming the file and field") {
  auto missing = ParseModuleFile("name: a\nnamespace: ns\nconfig: {kernelVersion: '6.1'}\n",
                                 "bad.yaml");
  REQUIRE_FALSE(missing.ok());
  CHECK(std::string(missing.status().message()).find("bad.yaml") != std::string::npos);
  CHECK(std::string(missing.status().message()).find("containerImage") != std::string::npos);

  auto wrong_type = ParseModuleFile("name: a\nnamespace: ns\nconfig: [1]\n", "t.yaml");
  REQUIRE_FALSE(wrong_type.ok());
  // The line is the file's own, not the wrapping document's.
  CHECK(std::string(wrong_type.status().message()).rfind("t.yaml:3: ", 0) == 0);
  CHECK(std::string(wrong_type.status().message()).find("config") != std::string::npos);

  auto broken = ParseModuleFile("name: [\n", "y.yaml");
  REQUIRE_FALSE(broken.ok());
  CHECK(std::string(broken.status().message()).rfind("y.yaml:", 0) == 0);

  CHECK_FALSE(ParseModuleFile("", "empty.yaml").ok());

  // The controller's rules, as the agent applies them to a desired state.
  auto hostile = ParseModuleFile(
      "name: a\nnamespace: ns\nconfig:\n  kernelVersion: '6.1'\n  containerImage: reg/a:1\n"
      "  modprobe: {moduleName: a, dirName: ../../etc, firmwarePath: /etc}\n",
      "hostile.yaml");
  REQUIRE_FALSE(hostile.ok());
  CHECK(std::string(hostile.status().message()) ==
        "hostile.yaml: module ns/a: config.modprobe.dirName: \"../../etc\" is not an absolute "
        "path; use an absolute path without '.', '..', '//' or a trailing '/', e.g. /opt");
}

}  // namespace
}  // namespace kmodd::agentctl

#include "controller/source/kube_source.h"

#include <catch2/catch.hpp>

#include "common/json.h"

TEST_CASE("a Node object becomes the planner's Node: labels, taints, kernel and boot id") {
  auto o = kmodd::ParseJson(R"({"metadata":{"name":"w1","uid":"u","labels":{"role":"worker"}},
    "spec":{"taints":[{"key":"gpu","value":"none","effect":"NoExecute"}]},
    "status":{"nodeInfo":{"kernelVersion":"6.1.0-27-cloud-amd64","bootID":"b1","architecture":"amd64"}}})");
  REQUIRE(o.ok());
  auto n = kmodd::source::NodeFromObject(*o);
  REQUIRE(n.ok());
  CHECK(n->metadata.name == "w1");
  CHECK(n->metadata.labels.at("role") == "worker");
  REQUIRE(n->taints.size() == 1);
  CHECK(n->taints[0].effect == "NoExecute");
  CHECK(n->node_info.kernel_version == "6.1.0-27-cloud-amd64");
  CHECK(n->node_info.boot_id == "b1");
}

TEST_CASE("a Module list item (no kind) decodes; an invalid one is refused naming it") {
  auto o = kmodd::ParseJson(R"({"metadata":{"name":"a","namespace":"ns","resourceVersion":"7",
    "finalizers":["kmodd.io/unload"],"deletionTimestamp":"2026-01-01T00:00:00Z"},
    "spec":{"selector":{"role":"worker"},"imageRepoSecret":{"name":"pull"},"moduleLoader":{"container":{
      "modprobe":{"moduleName":"m"},"kernelMappings":[{"regexp":"^.+$","containerImage":"r/m:1"}]}}}})");
  REQUIRE(o.ok());
  auto m = kmodd::source::ModuleFromObject(*o);
  REQUIRE(m.ok());
  CHECK(m->Key() == "ns/a");
  CHECK(m->spec.image_repo_secret->name == "pull");
  const kmodd::source::ModuleMeta meta = kmodd::source::ModuleMetaFromObject(*o);
  CHECK(meta.deleting);
  CHECK(meta.resource_version == "7");
  CHECK(meta.finalizers == std::vector<std::string>{"kmodd.io/unload"});

  auto bad = kmodd::ParseJson(R"({"metadata":{"name":"b","namespace":"ns"},
    "spec":{"moduleLoader":{"container":{"modprobe":{"moduleName":"m"},"kernelMappings":[{"regexp":"^6\\.1\\.(["}]}}}})");
  REQUIRE(bad.ok());
  auto refused = kmodd::source::ModuleFromObject(*bad);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("Module ns/b") != std::string::npos);
}

TEST_CASE("a pull secret's .dockerconfigjson is decoded; another type is refused") {
  auto s = kmodd::ParseJson(
      R"({"metadata":{"name":"pull","namespace":"ns"},"data":{".dockerconfigjson":"eyJhdXRocyI6e319"}})");
  REQUIRE(s.ok());
  auto c = kmodd::source::DockerConfigFromSecret(*s);
  REQUIRE(c.ok());
  CHECK(*c == R"({"auths":{}})");
  auto opaque = kmodd::ParseJson(R"({"metadata":{"name":"x","namespace":"ns"},"data":{"k":"dg=="}})");
  REQUIRE(opaque.ok());
  CHECK(absl::IsFailedPrecondition(kmodd::source::DockerConfigFromSecret(*opaque).status()));
}

#include "controller/kube_mode/kube_source.h"

#include <catch2/catch.hpp>

#include <algorithm>

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

TEST_CASE("a Node's kmodd.io/kernel-release label names the kernel its modules go into") {
  auto o = kmodd::ParseJson(R"({"metadata":{"name":"w1","labels":{"kmodd.io/kernel-release":"6.1.0-27-cloud-amd64"}},
    "status":{"nodeInfo":{"kernelVersion":"6.18.44-host","bootID":"b1"}}})");
  REQUIRE(o.ok());
  auto n = kmodd::source::NodeFromObject(*o);
  REQUIRE(n.ok());
  CHECK(n->node_info.kernel_version == "6.1.0-27-cloud-amd64");
  auto empty = kmodd::ParseJson(R"({"metadata":{"name":"w1","labels":{"kmodd.io/kernel-release":""}},
    "status":{"nodeInfo":{"kernelVersion":"6.18.44-host"}}})");
  REQUIRE(empty.ok());
  n = kmodd::source::NodeFromObject(*empty);
  REQUIRE(n.ok());
  CHECK(n->node_info.kernel_version == "6.18.44-host");
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
      R"({"metadata":{"name":"pull","namespace":"ns"},"type":"kubernetes.io/dockerconfigjson",)"
      R"("data":{".dockerconfigjson":"eyJhdXRocyI6e319"}})");
  REQUIRE(s.ok());
  auto c = kmodd::source::DockerConfigFromSecret(*s);
  REQUIRE(c.ok());
  CHECK(*c == R"({"auths":{}})");
  auto opaque = kmodd::ParseJson(
      R"({"metadata":{"name":"x","namespace":"ns"},"type":"Opaque","data":{"k":"dg=="}})");
  REQUIRE(opaque.ok());
  CHECK(absl::IsFailedPrecondition(kmodd::source::DockerConfigFromSecret(*opaque).status()));
}

TEST_CASE("a rejected Module object yields every problem, each naming the Module and the field") {
  auto bad = kmodd::ParseJson(R"({"metadata":{"name":"b","namespace":"ns"},
    "spec":{"selector":{"role":"worker"},"moduleLoader":{"container":{"modprobe":{"moduleName":"m"},
      "kernelMappings":[{"regexp":"^6\\.1\\.([","containerImage":""},{"literal":"6.1.0","containerImage":"r/m"}]}}}})");
  REQUIRE(bad.ok());
  std::vector<kmodd::api::Diagnostic> errors;
  CHECK_FALSE(kmodd::source::CheckModuleObject(*bad, errors));
  REQUIRE(errors.size() >= 2);
  std::vector<std::string> paths;
  for (const auto& e : errors) {
    CHECK(e.object == "Module ns/b");
    CHECK(e.source.empty());  // no file: the API server has no lines
    paths.push_back(e.path);
  }
  CHECK(std::count(paths.begin(), paths.end(),
                   "spec.moduleLoader.container.kernelMappings[0].regexp") == 1);
  CHECK(std::count(paths.begin(), paths.end(),
                   "spec.moduleLoader.container.kernelMappings[1].containerImage") == 1);
}

TEST_CASE("a pull Secret look-up failure says what to do, or nothing when it is transient") {
  using kmodd::source::PullSecretProblem;
  auto missing = PullSecretProblem("ns/pull", absl::NotFoundError("GET ...: 404 NotFound"));
  REQUIRE(missing);
  CHECK_FALSE(missing->readable);
  CHECK(missing->reason == "NotFound");
  CHECK(missing->message.find("Secret ns/pull (spec.imageRepoSecret) not found: create it in "
                              "namespace ns (kubectl create secret docker-registry pull -n ns") ==
        0);
  auto opaque = PullSecretProblem(
      "ns/pull", absl::FailedPreconditionError("Secret ns/pull is of type Opaque, not ..."));
  REQUIRE(opaque);
  CHECK(opaque->reason == "WrongType");
  CHECK(opaque->message.find("Secret ns/pull is of type Opaque, not ...: kmodd takes only "
                             "kubernetes.io/dockerconfigjson Secrets: recreate it with kubectl "
                             "create secret docker-registry pull -n ns") == 0);
  auto invalid = PullSecretProblem(
      "ns/pull", absl::InvalidArgumentError("Secret ns/pull: data: auths: expected an object"));
  REQUIRE(invalid);
  CHECK(invalid->reason == "InvalidContent");
  CHECK(invalid->message.find("nodes could not use it and are not sent it") != std::string::npos);
  auto forbidden = PullSecretProblem("ns/pull", absl::PermissionDeniedError("403 Forbidden"));
  REQUIRE(forbidden);
  CHECK(forbidden->reason == "Forbidden");
  CHECK(forbidden->message.find("add ns to the Helm value moduleNamespaces") != std::string::npos);
  CHECK_FALSE(PullSecretProblem("ns/pull", absl::UnavailableError("connection refused")));
}

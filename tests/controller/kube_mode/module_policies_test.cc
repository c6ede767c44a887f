// PolicyIndex (controller/kube_mode/module_policies.h): ModulePolicy objects from the API,
// by the Module each governs; broken and duplicate ones left out and reported.

#include "controller/kube_mode/module_policies.h"

#include <catch2/catch.hpp>

#include "common/json.h"

namespace kmodd::source {
namespace {

Value Object(const std::string& name, const std::string& module, const std::string& extra = "") {
  auto v = ParseJson(R"({"metadata": {"name": ")" + name + R"(", "namespace": "ns"}, "spec": {"moduleName": ")" +
                     module + "\"" + extra + "}}");
  REQUIRE(v.ok());
  return *v;
}

TEST_CASE("PolicyIndex: by Module: a broken one left out and reported: the first name governs") {
  PolicyIndex index;
  auto by_module = index.Sync({Object("a", "m1", R"(, "rollout": {"maxParallel": 2})"),
                               Object("b", "m2", R"(, "rollout": {"maxParallel": 0})"),
                               Object("c", "m1")});
  REQUIRE(by_module.size() == 1);
  CHECK(by_module.at("ns/m1").metadata.name == "a");
  CHECK(by_module.at("ns/m1").rollout.max_parallel->count == 2);
  const std::vector<std::string> problems = index.TakeProblems();
  REQUIRE(problems.size() == 2);
  CHECK(problems[0].find("ModulePolicy ns/b: spec.rollout.maxParallel") == 0);
  CHECK(problems[1].find("ModulePolicy ns/c: Module ns/m1 already has ModulePolicy ns/a") == 0);
  CHECK(index.TakeProblems().empty());  // reported once

  // b fixed: it governs m2.
  auto next = index.Apply(kube::EventType::kModified, Object("b", "m2", R"(, "rollout": {"maxParallel": "50%"})"));
  REQUIRE(next.has_value());
  CHECK(next->at("ns/m2").rollout.max_parallel->percent == 50);
  // a deleted: c governs m1 now.
  next = index.Apply(kube::EventType::kDeleted, Object("a", "m1"));
  REQUIRE(next.has_value());
  CHECK(next->at("ns/m1").metadata.name == "c");
  CHECK(index.TakeProblems().empty());
  // A bookmark or an unchanged object changes nothing.
  CHECK_FALSE(index.Apply(kube::EventType::kBookmark, Object("x", "y")).has_value());
  CHECK_FALSE(index.Apply(kube::EventType::kModified, Object("c", "m1")).has_value());
}

}  // namespace
}  // namespace kmodd::source

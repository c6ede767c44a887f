#include <catch2/catch.hpp>

#include <string>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "controller/server/status.h"

using kmodd::server::ControllerStatus;
using kmodd::server::ModuleState;
using kmodd::server::ModuleStatusValue;

namespace {

ModuleState Sample() {
  ModuleState m;
  m.namespace_ = "ns";
  m.name = "a";
  m.module_loader = {2, 2, 1};
  m.conditions = {{"Available", "False", "NodesNotLoaded", "1 of 2 nodes have it loaded"}};
  m.nodes = {{"w1", kmodd::api::Phase::kLoaded, "", "sha256:abc", 1'700'000'000'000, true},
             {"w2", kmodd::api::Phase::kUnknown, "agent disconnected", "", 0, false}};
  return m;
}

}  // namespace

TEST_CASE("a Module's status has one shape: counters, conditions, a row per node") {
  CHECK(kmodd::ToJsonLine(ModuleStatusValue(Sample())) ==
        absl::StrCat(
            R"({"moduleLoader":{"nodesMatchingSelectorNumber":2,"desiredNumber":2,)",
            R"("availableNumber":1},"conditions":[{"type":"Available","status":"False",)",
            R"("reason":"NodesNotLoaded","message":"1 of 2 nodes have it loaded"}],)",
            R"("nodes":[{"node":"w1","phase":"Loaded","message":"","imageDigest":"sha256:abc",)",
            R"("since":")", kmodd::server::Rfc3339(1'700'000'000'000), R"("},)",
            R"({"node":"w2","phase":"Unknown","message":"agent disconnected","connected":false}]})"));
}

TEST_CASE("the status document carries each Module's status in that same shape") {
  ControllerStatus s;
  s.modules = {Sample()};
  const kmodd::Value doc = kmodd::server::ToValue(s);
  const kmodd::Value* modules = doc.Find("modules");
  REQUIRE(modules != nullptr);
  REQUIRE(modules->AsList().size() == 1);
  const kmodd::Value& m = modules->AsList().front();
  CHECK(kmodd::StringAt(m, {"namespace"}) == "ns");
  CHECK(kmodd::StringAt(m, {"name"}) == "a");
  REQUIRE(m.Find("status") != nullptr);
  CHECK(kmodd::ToJsonLine(*m.Find("status")) == kmodd::ToJsonLine(ModuleStatusValue(Sample())));
}

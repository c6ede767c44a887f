// KMM's PreflightValidation objects as the API hands them (untrusted: written by anyone who
// may create them, perhaps with no webhook), and the status kmodd writes back.
#include <catch2/catch.hpp>

#include <string>

#include "common/json.h"
#include "controller/kube_mode/preflight_validations.h"

namespace kmodd::source {
namespace {

Value Parse(const std::string& json) {
  auto v = ParseJson(json);
  REQUIRE(v.ok());
  return *v;
}

TEST_CASE("PreflightValidation: the kernel and generation of a valid object") {
  auto r = ParsePreflightValidation(Parse(
      R"({"metadata":{"name":"to-6.1.0-28","generation":3},"spec":{"kernelVersion":"6.1.0-28-cloud-amd64","pushBuiltImage":true}})"));
  REQUIRE(r.ok());
  CHECK(r->name == "to-6.1.0-28");
  CHECK(r->generation == 3);
  CHECK(r->kernel == "6.1.0-28-cloud-amd64");
  CHECK(r->push_built_image);
  auto gke = ParsePreflightValidation(Parse(R"({"metadata":{"name":"g"},"spec":{"kernelVersion":"6.1.90+"}})"));
  REQUIRE(gke.ok());
  CHECK(gke->kernel == "6.1.90+");
}

TEST_CASE("PreflightValidation: hostile objects are refused naming the field") {
  struct Case {
    std::string name;
    std::string json;
    std::string message;
  };
  const std::string big(300, '1');
  for (const Case& c : std::vector<Case>{
           {"no metadata", R"({"spec":{"kernelVersion":"6.1.0-1"}})", "metadata.name: missing"},
           {"a numeric name", R"({"metadata":{"name":5},"spec":{"kernelVersion":"6.1.0-1"}})", "metadata.name: missing"},
           {"no spec", R"({"metadata":{"name":"p"}})", "spec.kernelVersion: missing"},
           {"a list for the kernel", R"({"metadata":{"name":"p"},"spec":{"kernelVersion":["6.1.0"]}})",
            "spec.kernelVersion: expected a string, got a list"},
           {"an empty kernel", R"({"metadata":{"name":"p"},"spec":{"kernelVersion":""}})", "is not a kernel release"},
           {"a shell in the kernel", R"({"metadata":{"name":"p"},"spec":{"kernelVersion":"6.1.0;rm -rf /"}})",
            "is not a kernel release"},
           {"a path in the kernel", R"({"metadata":{"name":"p"},"spec":{"kernelVersion":"../../etc-1.2"}})",
            "is not a kernel release"},
           {"a NUL", R"({"metadata":{"name":"p"},"spec":{"kernelVersion":"6.1.0\u0000-x"}})", "is not a kernel release"},
           {"too long", R"({"metadata":{"name":"p"},"spec":{"kernelVersion":")" + big + R"("}})", "at most 256 bytes"},
           {"two parts (KMM's webhook refuses them)", R"({"metadata":{"name":"p"},"spec":{"kernelVersion":"6.1"}})",
            "fewer than three parts"},
           {"a string for pushBuiltImage",
            R"({"metadata":{"name":"p"},"spec":{"kernelVersion":"6.1.0-1","pushBuiltImage":"yes"}})",
            "spec.pushBuiltImage: expected a boolean, got a string"},
       }) {
    SECTION(c.name) {
      auto r = ParsePreflightValidation(Parse(c.json));
      REQUIRE_FALSE(r.ok());
      CHECK_THAT(std::string(r.status().message()), Catch::Contains(c.message));
    }
  }
}

TEST_CASE("PreflightValidation status: KMM's stages, kmodd's in the reason, transition times kept when unchanged") {
  preflight::Result good;
  good.module = "b/good";
  good.stage = "Done";
  good.success = true;
  good.reason = "the image holds a driver for kernel K";
  preflight::Result bad;
  bad.module = "a/bad";
  bad.stage = "Content";
  bad.reason = "firmwarePath /firmware is not in the image";
  const Value running = PreflightStatus({good, bad}, nullptr, "2026-12-04T10:00:00Z", true);
  const Value& first = running.Find("modules")->AsList()[0];
  CHECK(StringAt(first, {"name"}) == "bad");  // sorted by namespace/name
  CHECK(StringAt(first, {"verificationStatus"}) == "InProgress");
  CHECK(StringAt(first, {"verificationStage"}) == "Image");

  const Value done = PreflightStatus({good, bad}, &running, "2026-12-04T10:00:05Z", false);
  const auto& list = done.Find("modules")->AsList();
  REQUIRE(list.size() == 2);
  CHECK(StringAt(list[0], {"verificationStatus"}) == "Failure");
  CHECK(StringAt(list[0], {"verificationStage"}) == "Image");
  CHECK(StringAt(list[0], {"statusReason"}) == "Content: firmwarePath /firmware is not in the image");
  CHECK(StringAt(list[0], {"lastTransitionTime"}) == "2026-12-04T10:00:05Z");
  CHECK(StringAt(list[1], {"namespace"}) == "b");
  CHECK(StringAt(list[1], {"verificationStatus"}) == "Success");
  CHECK(StringAt(list[1], {"verificationStage"}) == "Done");
  // The same verdicts again: the times stay.
  const Value again = PreflightStatus({good, bad}, &done, "2026-12-04T11:00:00Z", false);
  CHECK(StringAt(again.Find("modules")->AsList()[0], {"lastTransitionTime"}) == "2026-12-04T10:00:05Z");
  CHECK(StringAt(again.Find("modules")->AsList()[1], {"lastTransitionTime"}) == "2026-12-04T10:00:05Z");
  // A previous status of the wrong shape is ignored, not trusted.
  const Value junk = Parse(R"({"modules":"not a list"})");
  const Value fresh = PreflightStatus({bad}, &junk, "T", false);
  CHECK(StringAt(fresh.Find("modules")->AsList()[0], {"lastTransitionTime"}) == "T");
}

}  // namespace
}  // namespace kmodd::source

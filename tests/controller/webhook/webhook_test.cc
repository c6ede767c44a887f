#include <catch2/catch.hpp>

#include <string>

#include "absl/strings/str_replace.h"
#include "common/json.h"
#include "api/yaml_reader.h"
#include "controller/webhook/webhook.h"
#include "controller/webhook/webhook_server.h"
#include "tests/api/crd_cases.h"
#include "tests/controller/webhook/reviews.h"

namespace kmodd::webhook {
namespace {

using testing::kGood;
using testing::ModuleJson;
using testing::Review;

Value Respond(const std::string& body) {
  auto out = ReviewModuleJson(body);
  REQUIRE(out.ok());
  auto v = ParseJson(*out);
  REQUIRE(v.ok());
  CHECK(StringAt(*v, {"apiVersion"}) == "admission.k8s.io/v1");
  CHECK(StringAt(*v, {"kind"}) == "AdmissionReview");
  CHECK(StringAt(*v, {"response", "uid"}) == "705ab4f5-6393-11e8-b7cc-42010a800002");
  return *v;
}

bool Allowed(const Value& v) {
  const Value* a = Lookup(v, {"response", "allowed"});
  REQUIRE(a != nullptr);
  return a->AsBool();
}

std::string Message(const Value& v) { return StringAt(v, {"response", "status", "message"}); }

TEST_CASE("webhook allows a valid Module on create") {
  const Value v = Respond(Review("CREATE", ModuleJson(kGood)));
  CHECK(Allowed(v));
  CHECK(Lookup(v, {"response", "status"}) == nullptr);
}

TEST_CASE("webhook refuses an invalid Module naming each field path") {
  struct Row {
    const char* what;
    std::string mappings;
    std::string expect;
  };
  const Row rows[] = {
      {"a bad regexp", R"([{"regexp": "^(6\\.1", "containerImage": "r/x:1"}])",
       "spec.moduleLoader.container.kernelMappings[0].regexp: "},
      {"neither regexp nor literal", R"([{"containerImage": "r/x:1"}])",
       "spec.moduleLoader.container.kernelMappings[0]: sets neither regexp nor literal"},
      {"both regexp and literal",
       R"([{"regexp": "^.+$", "containerImage": "r/x:1"}, {"regexp": "a", "literal": "b", "containerImage": "r/x:1"}])",
       "spec.moduleLoader.container.kernelMappings[1]: sets both regexp and literal"},
  };
  for (const Row& row : rows) {
    INFO(row.what);
    const Value v = Respond(Review("CREATE", ModuleJson(row.mappings)));
    CHECK_FALSE(Allowed(v));
    CHECK(IntAt(v, {"response", "status", "code"}) == 422);
    CHECK(Message(v).find(row.expect) != std::string::npos);
  }
}

TEST_CASE("webhook lists every problem - separated by semicolons") {
  const Value v = Respond(Review(
      "CREATE", ModuleJson(R"([{"containerImage": "r/x:1"}, {"regexp": "(", "containerImage": "r/x:1"}])")));
  CHECK_FALSE(Allowed(v));
  const std::string m = Message(v);
  CHECK(m.find("kernelMappings[0]: ") != std::string::npos);
  CHECK(m.find("; spec.moduleLoader.container.kernelMappings[1].regexp: ") != std::string::npos);
}

TEST_CASE("webhook reports a field of the wrong type by its path") {
  const Value v = Respond(Review("CREATE", ModuleJson(R"({"regexp": "x"})")));
  CHECK_FALSE(Allowed(v));
  CHECK(Message(v).find("spec.moduleLoader.container.kernelMappings") != std::string::npos);
}

TEST_CASE("webhook warns about unknown fields but allows the Module") {
  const Value v = Respond(Review(
      "CREATE", ModuleJson(R"([{"regexp": "^.+$", "containerImage": "r/x:1", "colour": "red"}])")));
  CHECK(Allowed(v));
  const Value* w = Lookup(v, {"response", "warnings"});
  REQUIRE(w != nullptr);
  REQUIRE(w->AsList().size() == 1);
  CHECK(w->AsList()[0].AsString().find("kernelMappings[0].colour") != std::string::npos);
}

TEST_CASE("webhook always allows an update that leaves spec unchanged") {
  // Written under older rules: invalid today, but its finalizer must still come off.
  const std::string bad = R"([{"containerImage": "r/x:1"}])";
  const Value v = Respond(Review(
      "UPDATE", ModuleJson(bad), ModuleJson(bad, R"(, "finalizers": ["kmodd.io/unload"])")));
  CHECK(Allowed(v));
}

TEST_CASE("webhook validates an update that changes spec") {
  const Value v = Respond(Review("UPDATE", ModuleJson(R"([{"regexp": "(", "containerImage": "r/x:1"}])"),
                                 ModuleJson(kGood)));
  CHECK_FALSE(Allowed(v));
  CHECK(Message(v).find("kernelMappings[0].regexp") != std::string::npos);
  CHECK(Allowed(Respond(Review("UPDATE", ModuleJson(kGood), ModuleJson(R"([{"containerImage": "r/x:1"}])")))));
}

TEST_CASE("webhook does not refuse a delete") {
  CHECK(Allowed(Respond(Review("DELETE", "null", ModuleJson(R"([{"containerImage": "r/x:1"}])")))));
}

TEST_CASE("webhook answers InvalidArgument to what is not an AdmissionReview") {
  CHECK(ReviewModuleJson("{").status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(ReviewModuleJson(R"({"apiVersion":"v1","kind":"Pod"})").status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(ReviewModuleJson(R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}})")
            .status()
            .code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kmodd::webhook

namespace kmodd::webhook {
namespace {

using testing::kGood;
using testing::ModuleJson;
using testing::Review;

TEST_CASE("webhook routes only POST /validate-module") {
  const http::Router routes = Routes();
  auto route = [&](const std::string& method, const std::string& target, const std::string& body) {
    return routes.Route({method, target, body, "127.0.0.1"});
  };
  CHECK(route("GET", "/validate-module", "").status == 405);
  CHECK(route("POST", "/other", "").status == 404);
  CHECK(route("POST", "/validate-module?timeout=10s", "{}").status == 400);
  const http::ServerReply r =
      route("POST", "/validate-module?timeout=10s", Review("CREATE", ModuleJson(kGood)));
  CHECK(r.status == 200);
  CHECK(r.content_type == "application/json");
  // A review takes seconds at 3 MiB: never on the I/O thread.
  CHECK(routes.Find("POST", "/validate-module").where == http::RunOn::kWorkers);
}

TEST_CASE("webhook refuses what the Module CRD refuses - naming the same field paths") {
  for (const testing::CrdCase& c : testing::LoadCrdCases()) {
    DYNAMIC_SECTION(c.name << ": " << c.description) {
      const std::string object = api::CanonicalJson(c.doc);
      const Value v = Respond(Review("CREATE", object));
      const std::string message = Message(v);
      INFO(message);
      CHECK(Allowed(v) == c.refused_at.empty());
      for (const std::string& path : c.refused_at) {
        CHECK((message.starts_with(path + ": ") ||
               message.find("; " + path + ": ") != std::string::npos));
      }
    }
  }
}

}  // namespace
}  // namespace kmodd::webhook

namespace kmodd::webhook {
namespace {

using testing::Review;

TEST_CASE("webhook checks a ModulePolicy: allowed when valid - refused naming the field") {
  const std::string good = R"({"apiVersion": "kmodd.io/v1alpha1", "kind": "ModulePolicy",
    "metadata": {"name": "p", "namespace": "ns"},
    "spec": {"moduleName": "m", "rollout": {"maxParallel": "10%", "maxFailed": 1, "canary": {"count": 2}}}})";
  auto respond = [](const std::string& body) {
    auto out = ReviewModuleJson(body);
    REQUIRE(out.ok());
    auto v = ParseJson(*out);
    REQUIRE(v.ok());
    return *v;
  };
  const Value ok = respond(Review("CREATE", good));
  CHECK(Lookup(ok, {"response", "allowed"})->AsBool());
  struct Row {
    const char* what;
    std::string spec;
    const char* expect;
  };
  const Row rows[] = {
      {"no moduleName", R"({"paused": true})", "spec.moduleName: required"},
      {"maxParallel 0", R"({"moduleName": "m", "rollout": {"maxParallel": 0}})", "spec.rollout.maxParallel: 0 would"},
      {"maxFailed 300%", R"({"moduleName": "m", "rollout": {"maxFailed": "300%"}})", "spec.rollout.maxFailed: "},
      {"maxFailed an object", R"({"moduleName": "m", "rollout": {"maxFailed": {"a": 1}}})", "spec.rollout.maxFailed: expected"},
      {"onFailure unknown", R"({"moduleName": "m", "rollout": {"onFailure": "Explode"}})", "spec.rollout.onFailure: "},
      {"count and selector", R"({"moduleName": "m", "rollout": {"canary": {"count": 1, "selector": {"a": "b"}}}})",
       "spec.rollout.canary: give either"},
  };
  for (const Row& row : rows) {
    INFO(row.what);
    const std::string object = std::string(R"({"apiVersion": "kmodd.io/v1alpha1", "kind": "ModulePolicy", "metadata": {"name": "p", "namespace": "ns"}, "spec": )") + row.spec + "}";
    const Value v = respond(Review("UPDATE", object));
    CHECK_FALSE(Lookup(v, {"response", "allowed"})->AsBool());
    const std::string message = StringAt(v, {"response", "status", "message"});
    INFO(message);
    CHECK(message.find(row.expect) != std::string::npos);
  }
  const http::Router routes = Routes();
  CHECK(routes.Route({"POST", "/validate-modulepolicy", Review("CREATE", good), "127.0.0.1"}).status == 200);
}

}  // namespace
}  // namespace kmodd::webhook

#include <catch2/catch.hpp>

#include <string>

#include "common/json.h"
#include "tests/fakes/fake_kube_client.h"

namespace kmodd::kube {
namespace {

Value J(const std::string& text) {
  auto v = ParseJson(text);
  REQUIRE(v.ok());
  return *v;
}

std::string Cms() { return "/api/v1/namespaces/ns/configmaps"; }

TEST_CASE("The fake client keeps objects with resourceVersions and enforces them") {
  FakeKubeClient client;
  auto created = client.Create(Cms(), J(R"({"metadata":{"name":"a"},"data":{"k":"1"}})"));
  REQUIRE(created.ok());
  CHECK(StringAt(*created, {"metadata", "namespace"}) == "ns");
  CHECK(client.Create(Cms(), J(R"({"metadata":{"name":"a"}})")).status().code() ==
        absl::StatusCode::kAlreadyExists);

  const std::string rv = StringAt(*created, {"metadata", "resourceVersion"});
  auto patched = client.MergePatch(Cms() + "/a", J(R"({"data":{"k":null,"j":"2"}})"));
  REQUIRE(patched.ok());
  CHECK(ToJsonLine(*patched->Find("data")) == R"({"j":"2"})");
  CHECK(StringAt(*patched, {"metadata", "resourceVersion"}) != rv);

  // An update over the old version conflicts; RetryOnConflict re-reads and succeeds.
  CHECK(client.Update(Cms() + "/a", *created).status().code() == absl::StatusCode::kAborted);
  client.FailNext(absl::OkStatus());
  client.FailNext(absl::AbortedError("409 Conflict"));
  int attempts = 0;
  const absl::Status st = RetryOnConflict([&] {
    ++attempts;
    auto current = client.Get(Cms() + "/a");
    if (!current.ok()) {
      return current.status();
    }
    return client.Update(Cms() + "/a", With(*current, "data", J(R"({"n":"3"})"))).status();
  });
  CHECK(st.ok());
  CHECK(attempts == 2);
  CHECK(StringAt(client.Objects(Cms())["a"], {"data", "n"}) == "3");

  // The status subresource only changes status.
  REQUIRE(UpdateStatus(client, Cms() + "/a", J(R"({"phase":"Ready"})")).ok());
  CHECK(StringAt(client.Objects(Cms())["a"], {"status", "phase"}) == "Ready");
  CHECK(StringAt(client.Objects(Cms())["a"], {"data", "n"}) == "3");

  REQUIRE(client.Apply(Cms() + "/b", J(R"({"metadata":{"name":"b"}})"), {"kmodd", true}).ok());
  CHECK(client.Objects(Cms()).size() == 2);
  REQUIRE(client.Delete(Cms() + "/b").ok());
  CHECK(client.Delete(Cms() + "/b").code() == absl::StatusCode::kNotFound);
}

TEST_CASE("RetryOnConflict gives up after its attempts and passes other errors through") {
  int attempts = 0;
  CHECK(RetryOnConflict([&] {
          ++attempts;
          return absl::AbortedError("409");
        }, 3).code() == absl::StatusCode::kAborted);
  CHECK(attempts == 3);
  attempts = 0;
  CHECK(RetryOnConflict([&] {
          ++attempts;
          return absl::NotFoundError("404");
        }).code() == absl::StatusCode::kNotFound);
  CHECK(attempts == 1);
}

}  // namespace
}  // namespace kmodd::kube

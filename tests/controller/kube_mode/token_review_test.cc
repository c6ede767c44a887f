#include "controller/kube_mode/token_review.h"

#include <catch2/catch.hpp>

#include "absl/strings/escaping.h"
#include "common/json.h"
#include "tests/fakes/fake_clock.h"

namespace kmodd::server {
namespace {

// As kube-apiserver 1.34 answers for a projected token bound to pod agent-a on node-a.
constexpr char kReview[] = R"({
  "kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1", "metadata": {},
  "spec": {"token": "x", "audiences": ["kmodd"]},
  "status": {
    "authenticated": true,
    "user": {
      "username": "system:serviceaccount:kmodd-system:kmodd-agent",
      "uid": "579a678d-7252-4258-86be-bfa0c281246a",
      "groups": ["system:serviceaccounts", "system:serviceaccounts:kmodd-system", "system:authenticated"],
      "extra": {
        "authentication.kubernetes.io/credential-id": ["JTI=244308fe-f28b-454b-839a-40a24be6a825"],
        "authentication.kubernetes.io/node-name": ["node-a"],
        "authentication.kubernetes.io/pod-name": ["agent-a"],
        "authentication.kubernetes.io/pod-uid": ["49500e70-bd79-43ce-81fd-4e8015b61f9e"]
      }
    },
    "audiences": ["kmodd"]
  }})";

constexpr char kAgent[] = "system:serviceaccount:kmodd-system:kmodd-agent";

ReviewedToken Parse(const char* text) {
  auto v = ParseJson(text);
  REQUIRE(v.ok());
  auto t = ParseTokenReview(*v);
  REQUIRE(t.ok());
  return *t;
}

TEST_CASE("a token review names the service account and the node of the bound pod") {
  const ReviewedToken t = Parse(kReview);
  CHECK(t.authenticated);
  CHECK(t.username == kAgent);
  CHECK(t.node_name == "node-a");
  CHECK(Parse(R"({"kind":"TokenReview","status":{"authenticated":false,"error":"expired"}})")
            .error == "expired");
  CHECK(ParseTokenReview(Value::EmptyMap()).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("an agent's token is accepted only for its own node") {
  const ReviewedToken t = Parse(kReview);
  CHECK(CheckAgentToken(t, kAgent, "node-a").ok());
  CHECK(CheckAgentToken(t, kAgent, "node-b").code() == absl::StatusCode::kPermissionDenied);
  CHECK(CheckAgentToken(t, "system:serviceaccount:other:kmodd-agent", "node-a").code() ==
        absl::StatusCode::kPermissionDenied);
  ReviewedToken unbound = t;
  unbound.node_name.clear();
  CHECK(CheckAgentToken(unbound, kAgent, "node-a").code() == absl::StatusCode::kPermissionDenied);
  ReviewedToken bad = t;
  bad.authenticated = false;
  CHECK(CheckAgentToken(bad, kAgent, "node-a").code() == absl::StatusCode::kUnauthenticated);
}

TEST_CASE("an agent's token must be reviewed for the audience kmodd") {
  ReviewedToken t = Parse(kReview);
  REQUIRE(t.audiences == std::vector<std::string>{"kmodd"});
  t.audiences = {};  // a token without the audience: the API server answers none in common
  const absl::Status st = CheckAgentToken(t, kAgent, "node-a");
  CHECK(st.code() == absl::StatusCode::kPermissionDenied);
  CHECK(st.message().find("audience") != std::string_view::npos);
  t.audiences = {"https://kubernetes.default.svc"};
  CHECK(CheckAgentToken(t, kAgent, "node-a").code() == absl::StatusCode::kPermissionDenied);
}

TEST_CASE("a JWT's expiry is read from its claims") {
  const std::string claims = absl::WebSafeBase64Escape(R"({"aud":["kmodd"],"exp":1796099248})");
  CHECK(JwtExpiry("h." + claims + ".sig") == absl::FromUnixSeconds(1796099248));
  CHECK(JwtExpiry("not a jwt") == absl::InfiniteFuture());
}

// Answers every TokenReview with kReview and counts them.
class ReviewingClient final : public kube::KubeClient {
 public:
  absl::StatusOr<Value> Get(std::string_view) override { return absl::UnimplementedError(""); }
  absl::StatusOr<kube::ObjectList> List(std::string_view, const kube::ListOptions&) override {
    return absl::UnimplementedError("");
  }
  absl::Status Watch(std::string_view, const kube::WatchOptions&, const kube::WatchHandler&) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<Value> Create(std::string_view collection, const Value& object) override {
    ++calls;
    CHECK(collection == "/apis/authentication.k8s.io/v1/tokenreviews");
    CHECK(ToJsonLine(*Lookup(object, {"spec", "audiences"})) == R"(["kmodd"])");
    if (down) {
      return absl::UnavailableError("connection refused");
    }
    return *ParseJson(answer);
  }
  absl::StatusOr<Value> Update(std::string_view, const Value&) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<Value> MergePatch(std::string_view, const Value&) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<Value> Apply(std::string_view, const Value&, const kube::ApplyOptions&) override {
    return absl::UnimplementedError("");
  }
  absl::Status Delete(std::string_view) override { return absl::UnimplementedError(""); }

  int calls = 0;
  bool down = false;
  std::string answer = kReview;
};

TEST_CASE("a positive token review is reused for five minutes, then asked again") {
  ReviewingClient client;
  FakeClock clock;
  TokenReviewAuthenticator auth(client, "kmodd-system", clock);
  CHECK(auth.Authenticate("tok", "node-a").ok());
  CHECK(auth.Authenticate("tok", "node-b").status().code() == absl::StatusCode::kPermissionDenied);
  CHECK(client.calls == 1);
  clock.Advance(absl::Minutes(6));
  client.down = true;
  CHECK(auth.Authenticate("tok", "node-a").status().code() == absl::StatusCode::kUnavailable);
  CHECK(client.calls == 2);
  CHECK(auth.Authenticate("", "node-a").status().code() == absl::StatusCode::kUnauthenticated);
}

TEST_CASE("a refused token is remembered for ten seconds: a repeating client costs one review") {
  ReviewingClient client;
  client.answer = R"({"kind":"TokenReview","status":{"authenticated":false,"error":"invalid"}})";
  FakeClock clock;
  TokenReviewAuthenticator auth(client, "kmodd-system", clock);
  for (int i = 0; i < 100; ++i) {
    CHECK(auth.Authenticate("forged", "node-a").status().code() ==
          absl::StatusCode::kUnauthenticated);
  }
  CHECK(client.calls == 1);
  clock.Advance(absl::Seconds(11));
  client.answer = kReview;  // the token became known (another API server caught up)
  CHECK(auth.Authenticate("forged", "node-a").ok());
  CHECK(client.calls == 2);
}

TEST_CASE("an accepted token holds until its JWT expiry") {
  ReviewingClient client;
  FakeClock clock;
  TokenReviewAuthenticator auth(client, "kmodd-system", clock);
  const std::string claims = absl::WebSafeBase64Escape(R"({"aud":["kmodd"],"exp":1700003600})");
  absl::StatusOr<absl::Time> until = auth.Authenticate("h." + claims + ".s", "node-a");
  REQUIRE(until.ok());
  CHECK(*until == absl::FromUnixSeconds(1700003600));
}

}  // namespace
}  // namespace kmodd::server

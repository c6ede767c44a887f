// The admission webhook on common/http's server (the server's own behaviour under hostile
// clients is in tests/common/http/server_test.cc): reviews over TLS, and the serving
// certificate replaced while it runs.

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "common/json.h"
#include "controller/webhook/webhook_server.h"
#include "tests/common/http/raw_client.h"
#include "tests/common/http/test_pki.h"
#include "tests/controller/webhook/reviews.h"

namespace kmodd::webhook {
namespace {

using kmodd::testing::PostRequest;
using kmodd::testing::RawClient;
using kmodd::testing::TestResponse;

std::string ValidReview() { return testing::Review("CREATE", testing::ModuleJson(testing::kGood)); }

bool Allowed(const std::optional<TestResponse>& r) {
  if (!r || r->status != 200) {
    return false;
  }
  absl::StatusOr<Value> v = ParseJson(r->body);
  const Value* a = v.ok() ? Lookup(*v, {"response", "allowed"}) : nullptr;
  return a != nullptr && a->IsBool() && a->AsBool();
}

// Its log is not read here: only errors reach stderr.
struct Webhook {
  Webhook() : pki(http::testing::MakePki("IP:127.0.0.1")), log(stderr, LogLevel::kError) {
    http::ServerOptions o;
    o.listen = "127.0.0.1:0";
    absl::StatusOr<std::unique_ptr<WebhookServer>> s =
        WebhookServer::Start(o, pki.cert_pem, pki.key_pem, log);
    REQUIRE(s.ok());
    server = *std::move(s);
  }

  http::testing::Pki pki;
  Logger log;
  std::unique_ptr<WebhookServer> server;  // last: it goes before the log it writes to
};

TEST_CASE("webhook server admits a valid Module over TLS and answers 400 to what is no review") {
  Webhook w;
  RawClient c;
  REQUIRE(c.Open(w.server->port()));
  CHECK(Allowed(c.Post(ValidReview())));
  REQUIRE(c.Send(PostRequest("{\"kind\": \"Pod\"}")));
  const std::optional<TestResponse> bad = c.Receive();
  REQUIRE(bad);
  CHECK(bad->status == 400);
  REQUIRE(c.Send("GET /validate-module HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::optional<TestResponse> get = c.Receive();
  REQUIRE(get);
  CHECK(get->status == 405);
  CHECK(Allowed(c.Post(ValidReview())));  // all on one kept-alive connection
}

TEST_CASE("webhook server presents a renewed certificate to new connections, open ones keep theirs") {
  Webhook w;
  RawClient before;
  REQUIRE(before.Open(w.server->port()));
  CHECK(before.PeerCertificatePem() == w.pki.cert_pem);

  const http::testing::Pki renewed = http::testing::MakePki("IP:127.0.0.1");
  REQUIRE(w.server->SetCertificate(renewed.cert_pem, renewed.key_pem).ok());
  RawClient after;
  REQUIRE(after.Open(w.server->port()));
  CHECK(after.PeerCertificatePem() == renewed.cert_pem);
  CHECK(Allowed(after.Post(ValidReview())));
  CHECK(Allowed(before.Post(ValidReview())));
}

TEST_CASE("webhook server keeps its certificate when the new pair does not load") {
  Webhook w;
  const http::testing::Pki other = http::testing::MakePki("IP:127.0.0.1");
  CHECK(w.server->SetCertificate(other.cert_pem, w.pki.key_pem).code() ==
        absl::StatusCode::kInvalidArgument);
  RawClient c;
  REQUIRE(c.Open(w.server->port()));
  CHECK(c.PeerCertificatePem() == w.pki.cert_pem);
  CHECK(Allowed(c.Post(ValidReview())));
}

}  // namespace
}  // namespace kmodd::webhook

// Where the registry client sends a pull secret's credentials when a registry's 401 names a
// token realm: over HTTPS, or to the registry's own host when it is configured insecure
// (plain HTTP); never to another host in clear.
#include <catch2/catch.hpp>

#include <cerrno>
#include <string>

#include "absl/strings/escaping.h"
#include "common/http/beast_client.h"
#include "common/oci/reference.h"
#include "node-agent/kernel/errors.h"
#include "common/oci/registry_client.h"
#include "node-agent/server/module_status.h"
#include "tests/common/http/test_pki.h"
#include "tests/common/http/test_server.h"

using kmodd::http::BeastHttpClient;
using kmodd::http::ClientOptions;
using kmodd::http::testing::MakePki;
using kmodd::http::testing::Received;
using kmodd::http::testing::Reply;
using kmodd::http::testing::TestServer;
using kmodd::image::Credentials;
using kmodd::image::ParseImageRef;
using kmodd::image::Platform;
using kmodd::image::RegistryClient;
using kmodd::image::RegistryOptions;

namespace {

const std::string kBasic = "Basic " + absl::Base64Escape("kmodd:s3cret");

// A registry that answers every request with a Bearer challenge naming `realm`.
TestServer ChallengingRegistry(const std::string& realm) {
  return TestServer([realm](const Received&) {
    return Reply(401, R"({"errors":[{"code":"UNAUTHORIZED"}]})",
                 {{"WWW-Authenticate", "Bearer realm=\"" + realm +
                                           "\",service=\"reg\",scope=\"repository:k/d:pull\""}});
  });
}

// A token service that refuses everyone: the test looks at what it was sent.
TestServer Realm(const std::string& cert = "", const std::string& key = "") {
  return TestServer([](const Received&) { return Reply(401, "no"); }, cert, key);
}

// Resolves `image` with the pull secret's credentials; the error.
absl::Status Pull(const std::string& image, RegistryOptions options, ClientOptions client = {}) {
  auto http = BeastHttpClient::Create(std::move(client));
  REQUIRE(http.ok());
  options.credentials = Credentials{"kmodd", "s3cret"};
  options.attempts = 1;
  RegistryClient registry(**http, options);
  auto ref = ParseImageRef(image);
  REQUIRE(ref.ok());
  return registry.Resolve(*ref, Platform{}).status();
}

int AuthorizationsSent(const TestServer& server) {
  int n = 0;
  for (const Received& r : server.received()) {
    n += r.headers.Get("Authorization").has_value() ? 1 : 0;
  }
  return n;
}

std::string Port(const TestServer& s) { return std::to_string(s.port()); }

}  // namespace

TEST_CASE("credentials never go to a token realm on another host over plain HTTP") {
  TestServer realm = Realm();
  const std::string realm_url = "http://127.0.0.1:" + Port(realm) + "/token";
  TestServer registry = ChallengingRegistry(realm_url);
  RegistryOptions options;
  options.plain_http = true;  // the registry is insecure; the realm is a third host
  const absl::Status s = Pull("localhost:" + Port(registry) + "/k/d:v1", options);
  REQUIRE_FALSE(s.ok());
  INFO(s.message());
  CHECK(AuthorizationsSent(realm) == 0);
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("registry localhost:" + Port(registry) + " names the token realm " +
                             realm_url));
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("plain HTTP on another host than the registry"));
  CHECK(absl::IsFailedPrecondition(s));
}

TEST_CASE("credentials never go to a token realm on another host without TLS verification") {
  const auto pki = MakePki("IP:127.0.0.1");
  TestServer realm = Realm(pki.cert_pem, pki.key_pem);
  const std::string realm_url = realm.Url("/token");
  TestServer registry = ChallengingRegistry(realm_url);
  RegistryOptions options;
  options.plain_http = true;
  options.skip_tls_verify = true;
  ClientOptions client;
  client.tls.insecure_skip_verify = true;
  const absl::Status s = Pull("localhost:" + Port(registry) + "/k/d:v1", options, client);
  REQUIRE_FALSE(s.ok());
  INFO(s.message());
  CHECK(AuthorizationsSent(realm) == 0);
  CHECK_THAT(std::string(s.message()), Catch::Contains("TLS verification is off"));
}

TEST_CASE("credentials go to a plain-HTTP token realm on the insecure registry's own host") {
  TestServer realm = Realm();
  const std::string realm_url = "http://127.0.0.1:" + Port(realm) + "/token";
  TestServer registry = ChallengingRegistry(realm_url);
  RegistryOptions options;
  options.plain_http = true;
  const absl::Status s = Pull("127.0.0.1:" + Port(registry) + "/k/d:v1", options);
  REQUIRE_FALSE(s.ok());  // the realm refuses: it only records what it got
  INFO(s.message());
  REQUIRE(realm.received().size() == 1);
  CHECK(realm.received()[0].headers.Get("Authorization") == kBasic);
  CHECK_THAT(std::string(s.message()), Catch::Contains("refused the credentials (HTTP 401)"));
}

TEST_CASE("credentials go to an HTTPS token realm on another host") {
  const auto pki = MakePki("DNS:localhost,IP:127.0.0.1");
  TestServer realm = Realm(pki.cert_pem, pki.key_pem);
  const std::string realm_url = "https://localhost:" + Port(realm) + "/token";
  TestServer registry = ChallengingRegistry(realm_url);
  RegistryOptions options;
  options.plain_http = true;
  ClientOptions client;
  client.tls.ca_pem = pki.ca_pem;
  const absl::Status s = Pull("127.0.0.1:" + Port(registry) + "/k/d:v1", options, client);
  REQUIRE_FALSE(s.ok());
  INFO(s.message());
  REQUIRE(realm.received().size() == 1);
  CHECK(realm.received()[0].headers.Get("Authorization") == kBasic);
}

TEST_CASE("a plain-HTTP token realm is refused for a registry reached over HTTPS") {
  const auto pki = MakePki("IP:127.0.0.1");
  TestServer realm = Realm();
  const std::string realm_url = "http://127.0.0.1:" + Port(realm) + "/token";
  TestServer registry(
      [realm_url](const Received&) {
        return Reply(401, "", {{"WWW-Authenticate", "Bearer realm=\"" + realm_url + "\""}});
      },
      pki.cert_pem, pki.key_pem);
  ClientOptions client;
  client.tls.ca_pem = pki.ca_pem;
  const absl::Status s = Pull("127.0.0.1:" + Port(registry) + "/k/d:v1", RegistryOptions{}, client);
  REQUIRE_FALSE(s.ok());
  INFO(s.message());
  CHECK(AuthorizationsSent(realm) == 0);
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("plain HTTP and the registry is not configured insecure"));
}

TEST_CASE("a registry's 403 after auth is an auth problem that is retried, not a kernel refusal") {
  TestServer registry([](const Received& r) {
    if (!r.headers.Get("Authorization")) {
      return Reply(401, "", {{"WWW-Authenticate", "Basic realm=\"reg\""}});
    }
    return Reply(403, R"({"errors":[{"code":"DENIED","message":"requested access to the resource is denied"}]})");
  });
  RegistryOptions options;
  options.plain_http = true;
  const absl::Status s = Pull("127.0.0.1:" + Port(registry) + "/k/d:v1", options);
  REQUIRE_FALSE(s.ok());
  const std::string msg(s.message());
  INFO(msg);
  CHECK_THAT(msg, Catch::Contains("registry 127.0.0.1:" + Port(registry) +
                                  " refused the credentials of the pull secret (user \"kmodd\") "
                                  "for k/d; check imageRepoSecret"));
  CHECK_THAT(msg, Catch::Contains("HTTP 403"));
  CHECK_THAT(msg, Catch::Contains("DENIED"));
  CHECK(kmodd::agent::ClassOf(s) == kmodd::agent::ErrorClass::kRetry);
  kmodd::agent::ModuleFacts f;
  f.desired = true;
  f.problem = s;
  f.retry_scheduled = true;
  const auto phase = kmodd::agent::DerivePhase(f);
  CHECK(phase.error_class == kmodd::agent::ErrorClass::kRetry);
  CHECK_THAT(phase.message, Catch::EndsWith("(will retry)"));
  CHECK_THAT(phase.message, !Catch::Contains("not permitted"));
}

TEST_CASE("the kernel's own not-permitted errors stay terminal") {
  const absl::Status eperm =
      kmodd::kernel::KernelError(kmodd::kernel::KernelOp::kInsert, EPERM, "mod_a");
  CHECK(kmodd::agent::ClassOf(eperm) == kmodd::agent::ErrorClass::kTerminal);
  const absl::Status refused = absl::UnauthenticatedError("registry refused");
  CHECK(kmodd::agent::ClassOf(refused) == kmodd::agent::ErrorClass::kRetry);
}

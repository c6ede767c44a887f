#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/http/beast_client.h"
#include "tests/common/http/test_pki.h"
#include "tests/common/http/test_server.h"
#include "tests/temp_dir.h"

namespace kmodd::http {
namespace {

using testing::MakePki;
using testing::Pki;
using testing::Received;
using testing::Reply;
using testing::TestServer;

// A temporary directory holding a CA bundle file, removed at the end of the test.
class CaFile {
 public:
  explicit CaFile(const std::string& pem) : path_(dir_.Write("ca.pem", pem)) {}
  const std::string& path() const { return path_; }

 private:
  kmodd::testing::TempDir dir_{"tls-test"};
  std::string path_;
};

std::unique_ptr<BeastHttpClient> NewClient(TlsOptions tls) {
  ClientOptions options;
  options.tls = std::move(tls);
  auto client = BeastHttpClient::Create(std::move(options));
  REQUIRE(client.status().ToString() == "OK");
  return *std::move(client);
}

TlsOptions WithCaFile(const std::string& path) {
  TlsOptions tls;
  tls.ca_file = path;
  return tls;
}

TlsOptions WithCaPem(const std::string& pem) {
  TlsOptions tls;
  tls.ca_pem = pem;
  return tls;
}

TlsOptions Insecure() {
  TlsOptions tls;
  tls.insecure_skip_verify = true;
  return tls;
}

absl::StatusOr<Response> Get(HttpClient& client, const std::string& url) {
  Request request;
  request.url = url;
  request.timeout = std::chrono::seconds(10);
  return client.Fetch(request);
}

bool Contains(const absl::Status& status, const std::string& text) {
  return std::string(status.message()).find(text) != std::string::npos;
}

TestServer::Handler Ok() {
  return [](const Received&) { return Reply(200, "secure"); };
}

TEST_CASE("TLS to 127.0.0.1 verifies a certificate with that IP in its SANs against a CA file") {
  const Pki pki = MakePki("IP:127.0.0.1");
  TestServer server(Ok(), pki.cert_pem, pki.key_pem);
  const CaFile ca(pki.ca_pem);
  auto client = NewClient(WithCaFile(ca.path()));
  auto response = Get(*client, server.Url("/v2/"));
  REQUIRE(response.status().ToString() == "OK");
  CHECK(response->status == 200);
  CHECK(response->body == "secure");
  // RFC 6066: no SNI for an address literal.
  CHECK(server.received().at(0).sni.empty());
}

TEST_CASE("CA data given in memory is trusted like a CA file") {
  const Pki pki = MakePki("IP:127.0.0.1");
  TestServer server(Ok(), pki.cert_pem, pki.key_pem);
  auto client = NewClient(WithCaPem(pki.ca_pem));
  auto response = Get(*client, server.Url("/"));
  REQUIRE(response.status().ToString() == "OK");
  CHECK(response->body == "secure");
}

TEST_CASE("TLS without the server's CA fails with FailedPrecondition naming host and reason") {
  const Pki pki = MakePki("IP:127.0.0.1");
  TestServer server(Ok(), pki.cert_pem, pki.key_pem);
  auto client = NewClient({});
  auto response = Get(*client, server.Url("/v2/"));
  REQUIRE_FALSE(response.ok());
  CHECK(absl::IsFailedPrecondition(response.status()));
  CHECK(Contains(response.status(), "127.0.0.1:" + std::to_string(server.port())));
  CHECK(Contains(response.status(), "failed verification"));
  CHECK(Contains(response.status(), "local issuer certificate"));
  CHECK(server.received().empty());
}

TEST_CASE("insecure_skip_verify accepts a certificate that no trusted CA signed") {
  const Pki pki = MakePki("DNS:somewhere.else");
  TestServer server(Ok(), pki.cert_pem, pki.key_pem);
  auto client = NewClient(Insecure());
  auto response = Get(*client, server.Url("/"));
  REQUIRE(response.status().ToString() == "OK");
  CHECK(response->body == "secure");
}

TEST_CASE("a certificate without the server's IP in its SANs is refused for an IP URL") {
  const Pki pki = MakePki("DNS:localhost,IP:127.0.0.2");
  TestServer server(Ok(), pki.cert_pem, pki.key_pem);
  const CaFile ca(pki.ca_pem);
  auto client = NewClient(WithCaFile(ca.path()));
  auto response = Get(*client, server.Url("/"));
  REQUIRE_FALSE(response.ok());
  CHECK(absl::IsFailedPrecondition(response.status()));
  CHECK(Contains(response.status(), "IP address mismatch"));
}

TEST_CASE("a name URL sends SNI and is checked against the certificate's DNS names") {
  const Pki good = MakePki("DNS:localhost");
  TestServer server(Ok(), good.cert_pem, good.key_pem);
  const CaFile ca(good.ca_pem);
  auto client = NewClient(WithCaFile(ca.path()));
  const std::string url = "https://localhost:" + std::to_string(server.port()) + "/";
  auto response = Get(*client, url);
  REQUIRE(response.status().ToString() == "OK");
  CHECK(server.received().at(0).sni == "localhost");

  const Pki other = MakePki("DNS:registry.example,IP:127.0.0.1");
  TestServer wrong(Ok(), other.cert_pem, other.key_pem);
  const CaFile other_ca(other.ca_pem);
  auto strict = NewClient(WithCaFile(other_ca.path()));
  auto refused = Get(*strict, "https://localhost:" + std::to_string(wrong.port()) + "/");
  REQUIRE_FALSE(refused.ok());
  CHECK(absl::IsFailedPrecondition(refused.status()));
  CHECK(Contains(refused.status(), "hostname mismatch"));
}

TEST_CASE("https to a plain HTTP server fails with a TLS error, not a hang") {
  TestServer plain(Ok());
  auto client = NewClient({});
  auto response = Get(*client, "https://127.0.0.1:" + std::to_string(plain.port()) + "/");
  REQUIRE_FALSE(response.ok());
  CHECK(absl::IsFailedPrecondition(response.status()));
  CHECK(Contains(response.status(), "TLS handshake"));
}

TEST_CASE("an https URL that redirects to plain http is refused") {
  TestServer plain(Ok());
  const Pki pki = MakePki("IP:127.0.0.1");
  TestServer secure(
      [&](const Received&) {
        return Reply(302, "", {{"Location", plain.Url("/")}});
      },
      pki.cert_pem, pki.key_pem);
  auto client = NewClient(WithCaPem(pki.ca_pem));
  auto response = Get(*client, secure.Url("/"));
  REQUIRE_FALSE(response.ok());
  CHECK(absl::IsFailedPrecondition(response.status()));
  CHECK(Contains(response.status(), "plain HTTP"));
  CHECK(plain.received().empty());
}

TEST_CASE("a CA bundle that cannot be loaded fails Create with InvalidArgument") {
  ClientOptions options;
  options.tls.ca_file = "/nonexistent/kmodd/ca.pem";
  auto client = BeastHttpClient::Create(options);
  REQUIRE_FALSE(client.ok());
  CHECK(absl::IsInvalidArgument(client.status()));
  CHECK(Contains(client.status(), "/nonexistent/kmodd/ca.pem"));

  ClientOptions garbage;
  garbage.tls.ca_pem = "not a certificate";
  CHECK(absl::IsInvalidArgument(BeastHttpClient::Create(garbage).status()));
}

}  // namespace
}  // namespace kmodd::http

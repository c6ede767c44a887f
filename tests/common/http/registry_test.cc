// The client against Debian's docker-registry, started by tools/registry/start. Without the
// registry (tools/bootstrap installs it) these fail, loudly: they never pass by skipping.
#include <catch2/catch.hpp>

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>

#include "absl/strings/escaping.h"
#include "common/http/beast_client.h"
#include "common/http/status.h"
#include "tests/common/http/real_registry.h"

namespace kmodd::http {
namespace {

using kmodd::testing::Registry;
using kmodd::testing::Run;

std::unique_ptr<BeastHttpClient> NewClient(const std::string& ca_file = "") {
  ClientOptions options;
  options.tls.ca_file = ca_file;
  options.timeout = std::chrono::seconds(20);
  auto client = BeastHttpClient::Create(std::move(options));
  REQUIRE(client.status().ToString() == "OK");
  return *std::move(client);
}

absl::StatusOr<Response> Get(HttpClient& client, const std::string& url,
                             const std::string& authorization = "") {
  Request request;
  request.url = url;
  if (!authorization.empty()) {
    request.headers.Add("Authorization", authorization);
  }
  return client.Fetch(request);
}

// The value of `key="..."` in a challenge or of `"key": "..."` in JSON.
std::string Quoted(const std::string& text, const std::string& key) {
  size_t at = text.find(key);
  if (at == std::string::npos) {
    return "";
  }
  at = text.find('"', at + key.size());
  const size_t end = text.find('"', at + 1);
  return text.substr(at + 1, end - at - 1);
}

TEST_CASE("the client reaches a real docker-registry over plain HTTP", "[registry]") {
  Registry registry("http");
  auto client = NewClient();
  auto response = Get(*client, registry.Url("/v2/"));
  REQUIRE(response.status().ToString() == "OK");
  CHECK(response->status == 200);
  CHECK(response->headers.Get("Docker-Distribution-API-Version") == "registry/2.0");
  CHECK(response->body == "{}");

  auto missing = Get(*client, registry.Url("/v2/kmodd/none/manifests/v1"));
  REQUIRE(missing.status().ToString() == "OK");
  CHECK(absl::IsNotFound(StatusOf(*missing)));
  CHECK(std::string(StatusOf(*missing).message()).find("UNKNOWN") != std::string::npos);
}

TEST_CASE("the client verifies a real docker-registry's certificate with the harness CA",
          "[registry]") {
  Registry registry("https");
  REQUIRE(!registry.Env("KMODD_REGISTRY_CA").empty());
  auto trusting = NewClient(registry.Env("KMODD_REGISTRY_CA"));
  auto response = Get(*trusting, registry.Url("/v2/"));
  REQUIRE(response.status().ToString() == "OK");
  CHECK(response->status == 200);

  auto strict = NewClient();
  auto refused = Get(*strict, registry.Url("/v2/"));
  REQUIRE_FALSE(refused.ok());
  CHECK(absl::IsFailedPrecondition(refused.status()));
  CHECK(std::string(refused.status().message()).find(registry.Env("KMODD_REGISTRY")) !=
        std::string::npos);
}

TEST_CASE("a real docker-registry with token auth challenges, and its realm's token admits",
          "[registry]") {
  Registry registry("token");
  auto client = NewClient(registry.Env("KMODD_REGISTRY_CA"));
  auto challenge = Get(*client, registry.Url("/v2/"));
  REQUIRE(challenge.status().ToString() == "OK");
  REQUIRE(challenge->status == 401);
  const std::string bearer = challenge->headers.Get("WWW-Authenticate").value_or("");
  CHECK(bearer.rfind("Bearer ", 0) == 0);
  const std::string realm = Quoted(bearer, "realm=");
  CHECK(realm == registry.Env("KMODD_REGISTRY_TOKEN_REALM"));
  CHECK(Quoted(bearer, "service=") == registry.Env("KMODD_REGISTRY_TOKEN_SERVICE"));

  const std::string token_url =
      realm + "?service=" + Quoted(bearer, "service=") + "&scope=repository:kmodd/driver:pull";
  auto refused = Get(*client, token_url, "Basic " + absl::Base64Escape("kmodd:wrong"));
  REQUIRE(refused.status().ToString() == "OK");
  CHECK(refused->status == 401);

  const std::string credentials =
      registry.Env("KMODD_REGISTRY_USER") + ":" + registry.Env("KMODD_REGISTRY_PASSWORD");
  auto issued = Get(*client, token_url, "Basic " + absl::Base64Escape(credentials));
  REQUIRE(issued.status().ToString() == "OK");
  REQUIRE(issued->status == 200);
  const std::string token = Quoted(issued->body, "\"token\"");
  REQUIRE(!token.empty());

  auto admitted = Get(*client, registry.Url("/v2/"), "Bearer " + token);
  REQUIRE(admitted.status().ToString() == "OK");
  CHECK(admitted->status == 200);
}

}  // namespace
}  // namespace kmodd::http

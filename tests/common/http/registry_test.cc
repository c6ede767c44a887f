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

namespace kmodd::http {
namespace {

// Runs a command through the shell; returns its exit status and everything it printed.
std::pair<int, std::string> Run(const std::string& command) {
  std::string out;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) {
    out.append(buf, n);
  }
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// A registry in a temporary directory for the length of a test.
class Registry {
 public:
  explicit Registry(const std::string& mode) {
    char tmpl[] = "/tmp/kmodd-registry-test-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
    const auto [code, out] =
        Run(std::string(KMODD_SOURCE_DIR) + "/tools/registry/start " + mode + " " + dir_);
    if (code != 0) {
      // A constructor that throws gets no destructor: clean up before failing.
      std::filesystem::remove_all(dir_);
      FAIL("tools/registry/start " << mode << " failed:\n" << out);
    }
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      if (const size_t eq = line.find('='); eq != std::string::npos) {
        env_[line.substr(0, eq)] = line.substr(eq + 1);
      }
    }
    REQUIRE(!Env("KMODD_REGISTRY").empty());
  }
  ~Registry() {
    Run(std::string(KMODD_SOURCE_DIR) + "/tools/registry/stop " + dir_);
    std::filesystem::remove_all(dir_);
  }
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  std::string Env(const std::string& key) const {
    const auto it = env_.find(key);
    return it == env_.end() ? "" : it->second;
  }
  std::string Url(const std::string& path) const { return Env("KMODD_REGISTRY_URL") + path; }

 private:
  std::string dir_;
  std::map<std::string, std::string> env_;
};

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

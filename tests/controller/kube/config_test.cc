#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/escaping.h"
#include "tests/fakes/fake_clock.h"
#include "controller/kube/config.h"
#include "tests/temp_dir.h"

namespace kmodd::kube {
namespace {

using ::kmodd::testing::TempDir;

std::string B64(const std::string& s) { return absl::Base64Escape(s); }

constexpr char kCa[] = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";

std::string TwoContexts() {
  return "apiVersion: v1\nkind: Config\ncurrent-context: dev\n"
         "clusters:\n"
         "- name: c1\n  cluster:\n    server: https://127.0.0.1:6443\n"
         "    certificate-authority-data: " + B64(kCa) + "\n"
         "- name: c2\n  cluster:\n    server: https://10.0.0.1:443/\n"
         "    certificate-authority: ca.pem\n    insecure-skip-tls-verify: true\n"
         "users:\n"
         "- name: token-user\n  user:\n    token: abc.def\n"
         "- name: file-user\n  user:\n    tokenFile: token\n"
         "- name: cert-user\n  user:\n"
         "    client-certificate-data: " + B64("CERT") + "\n"
         "    client-key: key.pem\n"
         "contexts:\n"
         "- name: dev\n  context: {cluster: c1, user: token-user, namespace: kmm}\n"
         "- name: files\n  context: {cluster: c2, user: file-user}\n"
         "- name: certs\n  context: {cluster: c1, user: cert-user}\n";
}

TEST_CASE("A kubeconfig's current context gives the server, CA data, token and namespace") {
  TempDir dir;
  auto config = LoadKubeconfig(dir.Write("config", TwoContexts()));
  REQUIRE(config.status().ToString() == "OK");
  CHECK(config->server == "https://127.0.0.1:6443");
  CHECK(config->ca_pem == kCa);
  CHECK(config->token == "abc.def");
  CHECK(config->token_file.empty());
  CHECK(config->ns == "kmm");
  CHECK_FALSE(config->insecure_skip_tls_verify);
}

TEST_CASE("A kubeconfig's file references are read relative to the kubeconfig") {
  TempDir dir;
  dir.Write("ca.pem", kCa);
  dir.Write("key.pem", "KEY");
  const std::string path = dir.Write("config", TwoContexts());
  auto files = LoadKubeconfig(path, "files");
  REQUIRE(files.status().ToString() == "OK");
  CHECK(files->server == "https://10.0.0.1:443/");
  CHECK(files->ca_pem == kCa);
  CHECK(files->insecure_skip_tls_verify);
  CHECK(files->token_file == dir.path + "/token");
  CHECK(files->ns == "default");

  auto certs = LoadKubeconfig(path, "certs");
  REQUIRE(certs.status().ToString() == "OK");
  CHECK(certs->client_cert_pem == "CERT");
  CHECK(certs->client_key_pem == "KEY");
}

TEST_CASE("Kubeconfig errors name the file and the field") {
  struct Row {
    std::string text;
    std::string context;
    std::string message;
  };
  const std::string cluster =
      "clusters:\n- name: c\n  cluster: {server: 'https://h:1'}\n"
      "contexts:\n- name: x\n  context: {cluster: c, user: u}\n";
  const std::vector<Row> rows = {
      {"current-context: nope\n" + cluster, "", "contexts: no entry named \"nope\""},
      {cluster, "", "current-context: not set"},
      {cluster + "users:\n- name: u\n  user: {token: [1]}\n", "x",
       "users[u].user.token: not a string"},
      {cluster + "users:\n- name: u\n  user: {client-certificate-data: '%%%'}\n", "x",
       "users[u].user.client-certificate-data: not valid base64"},
      {cluster + "users:\n- name: u\n  user: {client-certificate-data: " + B64("C") + "}\n", "x",
       "users[u].user: client-certificate(-data) without client-key(-data)"},
      {cluster + "users:\n- name: u\n  user: {client-key: missing.pem}\n", "x",
       "users[u].user.client-key: "},
      {cluster + "users:\n- name: u\n  user: {exec: {command: aws}}\n", "x",
       "users[u].user.exec: not supported"},
      {"clusters:\n- name: c\n  cluster: {}\ncontexts:\n- name: x\n  context: {cluster: c}\n", "x",
       "clusters[c].cluster.server: missing"},
      {"contexts:\n- name: x\n  context: {user: u}\n", "x", "contexts[x].context.cluster: missing"},
      {"clusters: 3\ncontexts:\n- name: x\n  context: {cluster: c}\n", "x",
       "clusters: not a list"},
      {cluster + "users: []\n", "x", "users: no entry named \"u\""},
      {"- [", "", "kubeconfig "},
  };
  for (const Row& row : rows) {
    INFO(row.text);
    TempDir dir;
    const std::string path = dir.Write("config", row.text);
    auto config = LoadKubeconfig(path, row.context);
    REQUIRE_FALSE(config.ok());
    CHECK_THAT(std::string(config.status().message()), Catch::Contains(path));
    CHECK_THAT(std::string(config.status().message()), Catch::Contains(row.message));
  }
}

TEST_CASE("In-cluster config comes from the service account and the environment") {
  TempDir dir;
  dir.Write("token", "sa-token\n");
  dir.Write("ca.crt", kCa);
  dir.Write("namespace", "kmm-operator\n");
  setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto config = InClusterConfig(dir.path);
  REQUIRE(config.status().ToString() == "OK");
  CHECK(config->server == "https://10.96.0.1:443");
  CHECK(config->ca_pem == kCa);
  CHECK(config->token_file == dir.path + "/token");
  CHECK(config->ns == "kmm-operator");

  setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  auto v6 = InClusterConfig(dir.path);
  REQUIRE(v6.ok());
  CHECK(v6->server == "https://[fd00::1]:443");

  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  CHECK(InClusterConfig(dir.path).status().code() == absl::StatusCode::kFailedPrecondition);
}

void SetMtime(const std::string& path, int64_t seconds) {
  struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
  REQUIRE(utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

TEST_CASE("A token file is re-read when it changes, checked at most once a minute") {
  TempDir dir;
  const std::string file = dir.Write("token", "one\n");
  SetMtime(file, 1000);
  FakeClock clock;
  TokenSource source("", file, clock);
  CHECK(*source.Token() == "one");

  dir.Write("token", "two\n");
  SetMtime(file, 2000);
  clock.Advance(absl::Seconds(59));
  CHECK(*source.Token() == "one");  // not looked at yet
  clock.Advance(absl::Seconds(1));
  CHECK(*source.Token() == "two");

  // A rewrite with the same modification time is not noticed until a 401 says so.
  dir.Write("token", "three\n");
  SetMtime(file, 2000);
  clock.Advance(absl::Minutes(2));
  CHECK(*source.Token() == "two");
  source.Invalidate();
  CHECK(*source.Token() == "three");

  // A vanished file keeps the last good token.
  std::filesystem::remove(file);
  clock.Advance(absl::Minutes(2));
  CHECK(*source.Token() == "three");
}

TEST_CASE("A token source without a file gives its static token; a missing file is an error") {
  FakeClock clock;
  TokenSource fixed("static", "", clock);
  CHECK(*fixed.Token() == "static");
  TokenSource missing("", "/nonexistent/kmodd/token", clock);
  CHECK_FALSE(missing.Token().ok());
}

}  // namespace
}  // namespace kmodd::kube

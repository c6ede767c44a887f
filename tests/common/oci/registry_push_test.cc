// Push (common/oci/registry_push.cc) against Debian's docker-registry in every auth mode the
// pull supports (tools/registry/start): blobs monolithic and chunked, present blobs not sent
// again, a cross-repository mount, the manifest put, and the image pulled back byte for
// byte with the same client. Without the registry these fail: they never pass by skipping.
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/http/beast_client.h"
#include "common/oci/registry_client.h"
#include "common/oci/sha256.h"
#include "tests/common/http/real_registry.h"

namespace kmodd::image {
namespace {

using kmodd::testing::Registry;
using BlobPush = RegistryClient::BlobPush;

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) {
    c = static_cast<char>(rng());
  }
  return s;
}

struct Pushed {
  std::string config;
  std::string layer;
  std::string manifest;
};

Pushed Image(uint32_t seed) {
  Pushed p;
  p.config = R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}})";
  // Not a real tar: a registry stores bytes; what the agent makes of them is tested elsewhere.
  p.layer = RandomBytes(3 * 1024 * 1024 + 12345, seed);
  p.manifest = absl::StrCat(
      R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",)",
      R"("config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":")",
      Sha256::Of(p.config), R"(","size":)", p.config.size(), "},",
      R"("layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":")",
      Sha256::Of(p.layer), R"(","size":)", p.layer.size(), "}]}");
  return p;
}

std::string Pull(RegistryClient& client, const ImageRef& ref, const Descriptor& d) {
  std::string got;
  const absl::Status s = client.FetchBlob(ref, d, [&](const char* data, size_t n) {
    got.append(data, n);
    return absl::OkStatus();
  });
  REQUIRE(s.ToString() == "OK");
  return got;
}

void PushAndPullBack(const std::string& mode) {
  Registry registry(mode);
  http::ClientOptions http_options;
  http_options.tls.ca_file = registry.Env("KMODD_REGISTRY_CA");
  http_options.timeout = std::chrono::seconds(30);
  auto http = http::BeastHttpClient::Create(std::move(http_options));
  REQUIRE(http.status().ToString() == "OK");
  RegistryOptions options;
  options.plain_http = registry.Env("KMODD_REGISTRY_CA").empty();
  options.ca_file = registry.Env("KMODD_REGISTRY_CA");
  if (!registry.Env("KMODD_REGISTRY_USER").empty()) {
    options.credentials =
        Credentials{registry.Env("KMODD_REGISTRY_USER"), registry.Env("KMODD_REGISTRY_PASSWORD")};
  }
  RegistryClient client(**http, options);
  auto ref = ParseImageRef(registry.Env("KMODD_REGISTRY") + "/kmodd/signed:v1");
  REQUIRE(ref.ok());

  const Pushed image = Image(7);
  RegistryClient::PushBlobOptions chunked;
  chunked.chunk_bytes = 1 << 20;  // four PATCHes, the last one short, then the closing PUT
  auto layer = client.PushBlob(*ref, image.layer, Sha256::Of(image.layer), chunked);
  REQUIRE(layer.status().ToString() == "OK");
  CHECK(*layer == BlobPush::kUploaded);
  auto config = client.PushBlob(*ref, image.config, Sha256::Of(image.config), {});  // monolithic
  REQUIRE(config.status().ToString() == "OK");
  CHECK(*config == BlobPush::kUploaded);
  CHECK(client.blob_bytes_sent() == static_cast<int64_t>(image.layer.size() + image.config.size()));
  auto digest = client.PushManifest(*ref, kOciManifest, image.manifest);
  REQUIRE(digest.status().ToString() == "OK");
  CHECK(*digest == Sha256::Of(image.manifest));

  // Pushed again: the registry has both blobs, so no byte goes.
  const int64_t sent = client.blob_bytes_sent();
  auto again = client.PushBlob(*ref, image.layer, Sha256::Of(image.layer), {});
  REQUIRE(again.status().ToString() == "OK");
  CHECK(*again == BlobPush::kPresent);
  CHECK(client.blob_bytes_sent() == sent);

  // Into another repository of the same registry: mounted, not uploaded.
  auto other = ParseImageRef(registry.Env("KMODD_REGISTRY") + "/kmodd/other:v1");
  REQUIRE(other.ok());
  RegistryClient::PushBlobOptions mount;
  mount.mount_from = "kmodd/signed";
  auto mounted = client.PushBlob(*other, image.layer, Sha256::Of(image.layer), mount);
  REQUIRE(mounted.status().ToString() == "OK");
  CHECK(*mounted == BlobPush::kMounted);
  CHECK(client.blob_bytes_sent() == sent);

  // Pulled back by tag with a fresh client: the manifest's digest and every byte.
  RegistryClient reader(**http, options);
  auto resolved = reader.Resolve(*ref, Platform{});
  REQUIRE(resolved.status().ToString() == "OK");
  CHECK(resolved->manifest_digest == *digest);
  REQUIRE(resolved->layers.size() == 1);
  CHECK(Pull(reader, *ref, resolved->layers[0]) == image.layer);
  CHECK(Pull(reader, *ref, resolved->config) == image.config);
  CHECK(Pull(reader, *other, resolved->layers[0]) == image.layer);

  // A manifest naming a blob the repository lacks is refused by the registry, and said so.
  const Pushed missing = Image(8);
  auto refused = client.PushManifest(*ref, kOciManifest, missing.manifest);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Contains("pushing manifest") && Catch::Contains("HTTP 400"));
}

TEST_CASE("push to a real docker-registry: plain HTTP, anonymous", "[registry]") {
  PushAndPullBack("http");
}
TEST_CASE("push to a real docker-registry: HTTPS with the harness CA", "[registry]") {
  PushAndPullBack("https");
}
TEST_CASE("push to a real docker-registry: basic auth over HTTPS", "[registry]") {
  PushAndPullBack("basic");
}
TEST_CASE("push to a real docker-registry: bearer tokens over HTTPS", "[registry]") {
  PushAndPullBack("token");
}
TEST_CASE("push to a real docker-registry: basic auth over plain HTTP", "[registry]") {
  PushAndPullBack("basic-http");
}
TEST_CASE("push to a real docker-registry: bearer tokens over plain HTTP", "[registry]") {
  PushAndPullBack("token-http");
}

TEST_CASE("push to a real docker-registry: refusals name the cause, before any byte when they can",
          "[registry]") {
  Registry registry("basic");
  http::ClientOptions http_options;
  http_options.tls.ca_file = registry.Env("KMODD_REGISTRY_CA");
  auto http = http::BeastHttpClient::Create(std::move(http_options));
  REQUIRE(http.status().ToString() == "OK");
  RegistryOptions options;
  options.ca_file = registry.Env("KMODD_REGISTRY_CA");
  options.credentials = Credentials{registry.Env("KMODD_REGISTRY_USER"), "wrong"};
  RegistryClient client(**http, options);
  auto ref = ParseImageRef(registry.Env("KMODD_REGISTRY") + "/kmodd/signed:v1");
  REQUIRE(ref.ok());
  const std::string data = "some bytes";

  auto wrong_password = client.PushBlob(*ref, data, Sha256::Of(data), {});
  REQUIRE_FALSE(wrong_password.ok());
  CHECK(absl::IsUnauthenticated(wrong_password.status()));
  CHECK_THAT(std::string(wrong_password.status().message()), Catch::Contains("refused"));

  auto wrong_digest = client.PushBlob(*ref, data, Sha256::Of("other bytes"), {});
  REQUIRE_FALSE(wrong_digest.ok());
  CHECK(absl::IsInvalidArgument(wrong_digest.status()));
  CHECK_THAT(std::string(wrong_digest.status().message()), Catch::Contains("nothing was pushed"));
  CHECK(client.blob_bytes_sent() == 0);

  auto pinned = ParseImageRef(registry.Env("KMODD_REGISTRY") + "/kmodd/signed@" + Sha256::Of("x"));
  REQUIRE(pinned.ok());
  auto wrong_manifest = client.PushManifest(*pinned, kOciManifest, "{}");
  REQUIRE_FALSE(wrong_manifest.ok());
  CHECK_THAT(std::string(wrong_manifest.status().message()), Catch::Contains("nothing was pushed"));
}

}  // namespace
}  // namespace kmodd::image

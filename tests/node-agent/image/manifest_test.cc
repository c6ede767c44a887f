#include <catch2/catch.hpp>

#include "node-agent/image/registry_client.h"
#include "node-agent/image/sha256.h"

using kmodd::image::ParseManifest;
using kmodd::image::Platform;

namespace {

const std::string kA = "sha256:" + std::string(64, 'a');
const std::string kB = "sha256:" + std::string(64, 'b');
const std::string kC = "sha256:" + std::string(64, 'c');

}  // namespace

TEST_CASE("an image manifest gives its config and layers, OCI or Docker") {
  for (const char* type : {kmodd::image::kOciManifest, kmodd::image::kDockerManifest}) {
    const std::string body = std::string(R"({"schemaVersion": 2, "mediaType": ")") + type +
                             R"(", "config": {"mediaType": "c", "digest": ")" + kA +
                             R"(", "size": 10}, "layers": [
      {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": ")" + kB +
                             R"(", "size": 1000},
      {"mediaType": "application/vnd.oci.image.layer.v1.tar+zstd", "digest": ")" + kC +
                             R"(", "size": 2000}]})";
    auto m = ParseManifest(body, type, Platform{});
    REQUIRE(m.ok());
    CHECK_FALSE(m->chosen.has_value());
    CHECK(m->image.config.digest == kA);
    REQUIRE(m->image.layers.size() == 2);
    CHECK(m->image.layers[1].size == 2000);
    CHECK(m->image.layers[1].media_type == "application/vnd.oci.image.layer.v1.tar+zstd");
  }
}

TEST_CASE("an index or manifest list picks the node's platform") {
  const std::string body = R"({"schemaVersion": 2, "manifests": [
    {"mediaType": "m", "digest": ")" + kA + R"(", "size": 1, "platform": {"os": "linux", "architecture": "arm64"}},
    {"mediaType": "m", "digest": ")" + kB + R"(", "size": 2, "platform": {"os": "linux", "architecture": "amd64"}}]})";
  for (const char* type : {kmodd::image::kOciIndex, kmodd::image::kDockerList}) {
    auto m = ParseManifest(body, type, Platform{"linux", "amd64"});
    REQUIRE(m.ok());
    REQUIRE(m->chosen.has_value());
    CHECK(m->chosen->digest == kB);
  }
  auto none = ParseManifest(body, kmodd::image::kOciIndex, Platform{"linux", "s390x"});
  REQUIRE_FALSE(none.ok());
  CHECK(std::string(none.status().message()).find("has no linux/s390x manifest (it has: linux/arm64, linux/amd64)") !=
        std::string::npos);
}

TEST_CASE("manifests kmodd cannot use are refused with the reason") {
  CHECK_FALSE(ParseManifest("not json {", kmodd::image::kOciManifest, Platform{}).ok());
  auto v1 = ParseManifest(R"({"schemaVersion": 1})",
                          "application/vnd.docker.distribution.manifest.v1+prettyjws", Platform{});
  REQUIRE_FALSE(v1.ok());
  CHECK(std::string(v1.status().message()).find("schema 1 is not supported") != std::string::npos);
  auto md5 = ParseManifest(R"({"config": {"digest": "md5:abc", "size": 1}, "layers": []})",
                           kmodd::image::kOciManifest, Platform{});
  REQUIRE_FALSE(md5.ok());
  CHECK(std::string(md5.status().message()).find("sha256 only") != std::string::npos);
}

TEST_CASE("sha256 digests are computed as registries name blobs") {
  CHECK(kmodd::image::Sha256::Of("") ==
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  kmodd::image::Sha256 h;
  h.Update("ab", 2);
  h.Update("c", 1);
  CHECK(h.Digest() == "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/oci/registry_client.h"
#include "common/oci/sha256.h"

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

// Registry documents come from the network: each hostile shape is an error naming the field
// (or, where the spec makes a field optional, a clean result), never an exception.
TEST_CASE("hostile manifests and indexes are refused naming the field, or read as the spec says") {
  const std::string d = R"("digest": ")" + kA + R"(", "size": 1)";
  const std::string amd64 = R"("platform": {"os": "linux", "architecture": "amd64"})";
  struct Row {
    std::string name;
    std::string body;
    std::string want;  // the chosen digest, or a part of the error
  };
  const std::vector<Row> rows = {
      {"an entry without platform is skipped; the amd64 one is chosen",
       R"({"manifests": [{"mediaType": "m", "digest": ")" + kB + R"(", "size": 2},
                         {"mediaType": "m", )" + d + ", " + amd64 + "}]}",
       kA},
      {"only entries without platform: none fits, and the message says why",
       R"({"manifests": [{)" + d + "}]}",
       "has no linux/amd64 manifest (it has: manifests[0] without a platform)"},
      {"platform null is no platform", R"({"manifests": [{)" + d + R"(, "platform": null}]})",
       "manifests[0] without a platform"},
      {"platform of the wrong type", R"({"manifests": [{)" + d + R"(, "platform": "linux/amd64"}]})",
       "manifest: manifests[0].platform: expected an object, got a string"},
      {"architecture of the wrong type",
       R"({"manifests": [{)" + d + R"(, "platform": {"os": "linux", "architecture": 64}}]})",
       "manifest: manifests[0].platform.architecture: expected a string, got a number"},
      {"an entry that is not an object", R"({"manifests": ["x"]})",
       "manifest: manifests[0]: expected an object, got a string"},
      {"manifests not a list", R"({"mediaType": ")" + std::string(kmodd::image::kOciIndex) +
                                   R"(", "manifests": {}})",
       "manifest.manifests: expected a list, got an object"},
      {"chosen entry without digest", R"({"manifests": [{"size": 1, )" + amd64 + "}]}",
       "manifest: manifests[0].digest: required, missing"},
      {"size as a string", R"({"manifests": [{"digest": ")" + kA + R"(", "size": "1", )" + amd64 + "}]}",
       "manifest: manifests[0].size: expected an integer, got a string"},
      {"a huge size", R"({"config": {"digest": ")" + kA + R"(", "size": 99999999999999999999}})",
       "integer out of the int64 range"},
      {"a size with an exponent", R"({"config": {"digest": ")" + kA + R"(", "size": 1e300}})",
       "fraction or exponent"},
      {"a negative size", R"({"config": {"digest": ")" + kA + R"(", "size": -1}, "layers": []})",
       "unsupported digest or size"},
      {"config null", R"({"config": null, "layers": []})", "manifest: config: expected a descriptor"},
      {"config missing", R"({"layers": []})", "manifest: .config: required, missing"},
      {"layers of the wrong type", R"({"config": {)" + d + R"(}, "layers": "x"})",
       "manifest.layers: expected a list, got a string"},
      {"a layer that is a number", R"({"config": {)" + d + R"(}, "layers": [7]})",
       "manifest: layers[0]: expected a descriptor object, got a number"},
      {"mediaType of the wrong type", R"({"mediaType": 2})",
       "manifest.mediaType: expected a string, got a number"},
      {"a list at the root", "[]", "manifest: expected a JSON object, got a list"},
      {"a string at the root", R"("x")", "manifest: expected a JSON object, got a string"},
      {"null at the root", "null", "manifest: expected a JSON object, got null"},
      {"deep nesting", std::string(100, '[') + std::string(100, ']'), "nesting deeper than 32"},
      {"deep nesting inside an object",
       R"({"annotations": )" + std::string(60, '[') + std::string(60, ']') + "}",
       "nesting deeper than 32"},
      {"a repeated key keeps the last value, as Go does",
       R"({"manifests": [{"digest": "x", "digest": ")" + kA + R"(", "size": 1, )" + amd64 + "}]}",
       kA},
      {"not UTF-8", "{\"mediaType\": \"\xff\"}", "invalid UTF-8"},
      {"empty", "", "manifest: not valid JSON"},
  };
  for (const Row& row : rows) {
    INFO(row.name << ": " << row.body);
    absl::StatusOr<kmodd::image::ParsedManifest> m = ParseManifest(row.body, "", Platform{"linux", "amd64"});
    if (row.want == kA) {
      REQUIRE(m.ok());
      REQUIRE(m->chosen.has_value());
      CHECK(m->chosen->digest == kA);
    } else {
      REQUIRE_FALSE(m.ok());
      CHECK_THAT(std::string(m.status().message()), Catch::Contains(row.want));
    }
  }
}

TEST_CASE("a token service answer gives its token, or an auth error naming the field") {
  using kmodd::image::ParseTokenResponse;
  CHECK(*ParseTokenResponse(R"({"token": "t1", "expires_in": 300})", "R") == "t1");
  CHECK(*ParseTokenResponse(R"({"access_token": "t2"})", "R") == "t2");
  CHECK(*ParseTokenResponse(R"({"token": "", "access_token": "t3"})", "R") == "t3");
  struct Row {
    std::string body;
    std::string error;
  };
  const std::vector<Row> rows = {
      {"{}", "token service R returned no token"},
      {R"({"token": null})", "token service R returned no token"},
      {R"({"token": 5})", "token service R answer.token: expected a string, got a number"},
      {R"({"token": {"x": 1}})", "token service R answer.token: expected a string, got an object"},
      {"[\"t\"]", "token service R answer: expected a JSON object, got a list"},
      {"<html>", "token service R answer: not valid JSON"},
      {"{\"token\": \"\xc0\xaf\"}", "invalid UTF-8"},
  };
  for (const Row& row : rows) {
    INFO(row.body);
    absl::StatusOr<std::string> t = ParseTokenResponse(row.body, "R");
    REQUIRE_FALSE(t.ok());
    CHECK(t.status().code() == absl::StatusCode::kUnauthenticated);
    CHECK_THAT(std::string(t.status().message()), Catch::Contains(row.error));
  }
}

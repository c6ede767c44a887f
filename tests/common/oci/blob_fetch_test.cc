#include <catch2/catch.hpp>

#include <atomic>
#include <string>

#include "common/http/beast_client.h"
#include "common/oci/reference.h"
#include "common/oci/registry_client.h"
#include "common/oci/sha256.h"
#include "tests/common/http/test_server.h"

using kmodd::http::BeastHttpClient;
using kmodd::http::testing::Canned;
using kmodd::http::testing::RawResponse;
using kmodd::http::testing::Received;
using kmodd::http::testing::Reply;
using kmodd::http::testing::TestServer;
using kmodd::image::Descriptor;
using kmodd::image::RegistryClient;
using kmodd::image::RegistryOptions;

namespace {

struct Fetched {
  absl::Status status;
  std::string body;
  int64_t progress = 0;
};

Fetched Fetch(TestServer& server, const std::string& blob, int64_t size) {
  auto http = BeastHttpClient::Create({});
  REQUIRE(http.ok());
  RegistryOptions options;
  options.plain_http = true;
  options.backoff = std::chrono::milliseconds(1);
  RegistryClient client(**http, options);
  auto ref = kmodd::image::ParseImageRef("127.0.0.1:" + std::to_string(server.port()) + "/k/d:v1");
  REQUIRE(ref.ok());
  Descriptor d;
  d.digest = kmodd::image::Sha256::Of(blob);
  d.size = size;
  Fetched out;
  std::atomic<int64_t> progress{0};
  out.status = client.FetchBlob(
      *ref, d,
      [&](const char* p, size_t n) {
        out.body.append(p, n);
        return absl::OkStatus();
      },
      &progress);
  out.progress = progress.load();
  return out;
}

}  // namespace

TEST_CASE("a blob cut mid-way resumes with Range and the consumer sees each byte once") {
  const std::string blob(100000, 'k');
  TestServer server([&](const Received& r) {
    if (r.headers.Get("Range") == "bytes=40000-") {
      return Reply(206, blob.substr(40000), {{"Content-Range", "bytes 40000-99999/100000"}});
    }
    // The whole blob announced, 40000 bytes sent, then the connection drops.
    const std::string full = RawResponse(200, blob);
    Canned cut{{full.substr(0, full.size() - 60000)}};
    cut.close = true;
    return cut;
  });
  const Fetched f = Fetch(server, blob, 100000);
  REQUIRE(f.status.ok());
  CHECK(f.body == blob);
  CHECK(f.progress == 100000);
  REQUIRE(server.received().size() == 2);
  CHECK(server.received()[1].headers.Get("Range") == "bytes=40000-");
}

TEST_CASE("a blob the registry serves short is reported truncated at once, without resuming") {
  const std::string blob(1000, 'k');
  TestServer server([&](const Received&) { return Reply(200, blob.substr(0, 600)); });
  const Fetched f = Fetch(server, blob, 1000);
  REQUIRE_FALSE(f.status.ok());
  CHECK_THAT(std::string(f.status.message()), Catch::Contains("is truncated: 600 of 1000 bytes"));
  CHECK(server.received().size() == 1);
}

TEST_CASE("a blob whose bytes do not match its digest is refused") {
  const std::string blob(1000, 'k');
  TestServer server([&](const Received&) { return Reply(200, std::string(1000, 'x')); });
  const Fetched f = Fetch(server, blob, 1000);
  REQUIRE_FALSE(f.status.ok());
  CHECK_THAT(std::string(f.status.message()), Catch::Contains("has the wrong content"));
}

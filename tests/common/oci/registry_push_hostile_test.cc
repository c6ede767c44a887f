// Push against a canned registry: what a registry says during an upload session (its
// Location, its 416 and Range, its stored digest) is checked before the client acts on it.
#include <catch2/catch.hpp>

#include <mutex>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/http/beast_client.h"
#include "common/oci/reference.h"
#include "common/oci/registry_client.h"
#include "common/oci/sha256.h"
#include "tests/common/http/test_server.h"

using kmodd::http::BeastHttpClient;
using kmodd::http::testing::Canned;
using kmodd::http::testing::Received;
using kmodd::http::testing::Reply;
using kmodd::http::testing::TestServer;
using kmodd::image::Credentials;
using kmodd::image::ParseImageRef;
using kmodd::image::RegistryClient;
using kmodd::image::RegistryOptions;
using kmodd::image::Sha256;

namespace {

using Push = RegistryClient::BlobPush;

struct Pushed {
  absl::StatusOr<Push> result;
  int64_t bytes_sent = 0;
};

// Pushes `data` to localhost:<port>/k/d over plain HTTP with a credential.
Pushed PushTo(const TestServer& server, const std::string& data, size_t chunk_bytes) {
  auto http = BeastHttpClient::Create({});
  REQUIRE(http.ok());
  RegistryOptions options;
  options.plain_http = true;
  options.attempts = 1;
  options.credentials = Credentials{"kmodd", "s3cret"};
  RegistryClient registry(**http, options);
  auto ref = ParseImageRef(absl::StrCat("localhost:", server.port(), "/k/d:v1"));
  REQUIRE(ref.ok());
  RegistryClient::PushBlobOptions o;
  o.chunk_bytes = chunk_bytes;
  Pushed p{registry.PushBlob(*ref, data, Sha256::Of(data), o), 0};
  p.bytes_sent = registry.blob_bytes_sent();
  return p;
}

bool SentTo(const TestServer& server, const std::string& method) {
  for (const Received& r : server.received()) {
    if (r.method == method) {
      return true;
    }
  }
  return false;
}

}  // namespace

TEST_CASE("an upload Location on another host or scheme is refused before any byte goes there") {
  TestServer elsewhere([](const Received&) { return Reply(202, ""); });
  const std::string other = absl::StrCat("http://127.0.0.1:", elsewhere.port(), "/upload/1");
  struct Case {
    std::string name;
    std::string location;
  };
  for (const Case& c : std::vector<Case>{
           {"another host (absolute URL)", other},
           {"another host (scheme-relative)", absl::StrCat("//127.0.0.1:", elsewhere.port(), "/u")},
           {"HTTPS on the same port", "https://localhost:PORT/v2/k/d/blobs/uploads/1"},
       }) {
    SECTION(c.name) {
      TestServer registry([&c](const Received& r) -> Canned {
        if (r.method == "HEAD") {
          return Reply(404, "");
        }
        std::string location = c.location;
        if (const size_t at = location.find("PORT"); at != std::string::npos) {
          location.replace(at, 4, std::to_string(std::stoi(r.headers.Get("Host")->substr(10))));
        }
        return Reply(202, "", {{"Location", location}});
      });
      const Pushed p = PushTo(registry, std::string(3000, 'x'), 1024);
      REQUIRE_FALSE(p.result.ok());
      INFO(p.result.status().message());
      CHECK(absl::IsFailedPrecondition(p.result.status()));
      CHECK_THAT(std::string(p.result.status().message()),
                 Catch::Contains("kmodd uploads only to the registry's own host"));
      CHECK(p.bytes_sent == 0);
      CHECK_FALSE(SentTo(registry, "PATCH"));
      CHECK(elsewhere.received().empty());
    }
  }
}

TEST_CASE("a chunk the registry refuses with 416 resumes from the offset the session holds") {
  const std::string data = std::string(1000, 'a') + std::string(1000, 'b') + std::string(500, 'c');
  std::mutex mu;
  std::string held;  // what the canned session stored
  int patches = 0;
  TestServer registry([&](const Received& r) -> Canned {
    std::lock_guard lock(mu);
    const std::vector<std::pair<std::string, std::string>> loc = {
        {"Location", "/v2/k/d/blobs/uploads/s1"}};
    if (r.method == "HEAD") {
      return Reply(404, "");
    }
    if (r.method == "POST") {
      return Reply(202, "", loc);
    }
    if (r.method == "PATCH") {
      ++patches;
      if (patches == 2) {
        // The second chunk: half of it stored, then a 416 (as after a dropped connection).
        held += r.body.substr(0, 400);
        return Reply(416, R"({"errors":[{"code":"BLOB_UPLOAD_INVALID"}]})");
      }
      const std::string range = *r.headers.Get("Content-Range");
      if (std::stoul(range.substr(0, range.find('-'))) != held.size()) {
        return Reply(416, "");
      }
      held += r.body;
      return Reply(202, "", loc);
    }
    if (r.method == "GET") {
      return Canned{{absl::StrCat("HTTP/1.1 204 No Content\r\nLocation: /v2/k/d/blobs/uploads/s1\r\n"
                                  "Range: 0-", held.size() - 1, "\r\nContent-Length: 0\r\n\r\n")}};
    }
    if (r.method == "PUT") {
      held += r.body;
      return Reply(201, "", {{"Docker-Content-Digest", Sha256::Of(held)}});
    }
    return Reply(405, "");
  });
  const Pushed p = PushTo(registry, data, 1000);
  INFO(p.result.status().message());
  REQUIRE(p.result.ok());
  CHECK(*p.result == Push::kUploaded);
  CHECK(held == data);  // each byte once, in order
  CHECK(patches == 4);  // 0-999, 1000-1999 (416), 1400-2399, 2400-2499
  CHECK(SentTo(registry, "GET"));
}

TEST_CASE("a registry that stores a blob under another digest is an error, not a pushed blob") {
  TestServer registry([](const Received& r) -> Canned {
    if (r.method == "HEAD") {
      return Reply(404, "");
    }
    if (r.method == "POST") {
      return Reply(202, "", {{"Location", "/v2/k/d/blobs/uploads/s1?state=x"}});
    }
    return Reply(201, "", {{"Docker-Content-Digest", Sha256::Of("something else")}});
  });
  const Pushed p = PushTo(registry, "data", 0);
  REQUIRE_FALSE(p.result.ok());
  CHECK(absl::IsDataLoss(p.result.status()));
  CHECK_THAT(std::string(p.result.status().message()), Catch::Contains("the registry stored it as"));
  bool digest_param = false;
  for (const Received& r : registry.received()) {
    digest_param = digest_param || (r.method == "PUT" && absl::StrContains(r.target, "?state=x&digest=sha256:"));
  }
  CHECK(digest_param);  // the closing PUT keeps the session's own query
}

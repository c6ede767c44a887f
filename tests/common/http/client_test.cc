#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <string>

#include "common/http/beast_client.h"
#include "common/http/status.h"
#include "tests/common/http/test_server.h"

namespace kmodd::http {
namespace {

using std::chrono::milliseconds;
using testing::Canned;
using testing::ChunkedReply;
using testing::Received;
using testing::Reply;
using testing::TestServer;

std::unique_ptr<BeastHttpClient> NewClient(ClientOptions options = {}) {
  auto client = BeastHttpClient::Create(std::move(options));
  REQUIRE(client.status().ToString() == "OK");
  return *std::move(client);
}

bool Contains(const absl::Status& status, const std::string& text) {
  return std::string(status.message()).find(text) != std::string::npos;
}

TEST_CASE("Fetch returns the status, headers and body of a GET and sends the caller's headers") {
  TestServer server([](const Received&) {
    return Reply(401, "{\"errors\":[]}",
                 {{"WWW-Authenticate", "Bearer realm=\"https://auth/token\""},
                  {"www-authenticate", "Basic realm=\"registry\""},
                  {"Docker-Distribution-API-Version", "registry/2.0"}});
  });
  auto client = NewClient();
  Request request;
  request.url = server.Url("/v2/?n=1");
  request.headers.Add("Accept", "application/json");
  auto response = client->Fetch(request);
  REQUIRE(response.status().ToString() == "OK");
  CHECK(response->status == 401);
  CHECK(response->body == "{\"errors\":[]}");
  CHECK(response->headers.Get("docker-distribution-api-version") == "registry/2.0");
  CHECK(
      response->headers.GetAll("WWW-Authenticate") ==
      std::vector<std::string>{"Bearer realm=\"https://auth/token\"", "Basic realm=\"registry\""});
  CHECK(response->url.port == server.port());
  CHECK(response->redirects == 0);

  const auto got = server.received();
  REQUIRE(got.size() == 1);
  CHECK(got[0].method == "GET");
  CHECK(got[0].target == "/v2/?n=1");
  CHECK(got[0].headers.Get("Host") == "127.0.0.1:" + std::to_string(server.port()));
  CHECK(got[0].headers.Get("Accept") == "application/json");
  CHECK(got[0].headers.Get("User-Agent") == "kmodd");
}

TEST_CASE("a POST sends its body with a Content-Length") {
  TestServer server([](const Received& r) { return Reply(201, r.body); });
  auto client = NewClient();
  Request request;
  request.method = "POST";
  request.url = server.Url("/token");
  request.body = "grant_type=password";
  auto response = client->Fetch(request);
  REQUIRE(response.status().ToString() == "OK");
  CHECK(response->status == 201);
  CHECK(response->body == "grant_type=password");
  CHECK(server.received().at(0).headers.Get("Content-Length") == "19");
}

TEST_CASE("Stream hands every byte of a chunked body to the handler, in order, after the head") {
  std::vector<std::string> chunks;
  std::string expected;
  for (int i = 0; i < 20; ++i) {
    chunks.push_back(std::string(1000 + i * 4096, static_cast<char>('a' + i)));
    expected += chunks.back();
  }
  TestServer server([&](const Received&) { return ChunkedReply(chunks, milliseconds(1)); });
  auto client = NewClient();
  int heads = 0;
  std::string got;
  BodyHandler handler;
  handler.on_head = [&](const Response& head) {
    ++heads;
    CHECK(head.status == 200);
    CHECK(got.empty());
    return absl::OkStatus();
  };
  handler.on_data = [&](const char* data, size_t n) {
    got.append(data, n);
    return absl::OkStatus();
  };
  Request request;
  request.url = server.Url("/v2/r/blobs/sha256:x");
  auto response = client->Stream(request, handler);
  REQUIRE(response.status().ToString() == "OK");
  CHECK(response->status == 200);
  CHECK(response->body.empty());
  CHECK(heads == 1);
  CHECK(got.size() == expected.size());
  CHECK(got == expected);
}

TEST_CASE("a large body reaches the handler in large pieces, not 512-byte reads") {
  const std::string body(4 << 20, 'x');
  TestServer server([&](const Received&) { return Reply(200, body); });
  auto client = NewClient();
  size_t total = 0;
  size_t largest = 0;
  BodyHandler handler;
  handler.on_data = [&](const char*, size_t n) {
    total += n;
    largest = std::max(largest, n);
    return absl::OkStatus();
  };
  Request request;
  request.url = server.Url("/blob");
  auto response = client->Stream(request, handler);
  REQUIRE(response.status().ToString() == "OK");
  CHECK(total == body.size());
  CHECK(largest >= 16384);
}

TEST_CASE("an error from the body handler aborts the transfer and is returned as is") {
  std::vector<std::string> chunks(50, std::string(100000, 'z'));
  TestServer server([&](const Received&) { return ChunkedReply(chunks, milliseconds(1)); });
  auto client = NewClient();
  int calls = 0;
  BodyHandler handler;
  handler.on_data = [&](const char*, size_t) {
    ++calls;
    return absl::DataLossError("digest mismatch");
  };
  Request request;
  request.url = server.Url("/blob");
  auto response = client->Stream(request, handler);
  REQUIRE_FALSE(response.ok());
  CHECK(absl::IsDataLoss(response.status()));
  CHECK(response.status().message() == "digest mismatch");
  CHECK(calls == 1);
}

TEST_CASE("Stream keeps an error body for the caller instead of handing it to the handler") {
  TestServer server(
      [](const Received&) { return Reply(404, R"({"errors":[{"code":"BLOB_UNKNOWN"}]})"); });
  auto client = NewClient();
  BodyHandler handler;
  handler.on_data = [](const char*, size_t) { return absl::InternalError("must not be called"); };
  Request request;
  request.url = server.Url("/v2/r/blobs/sha256:x?sig=secret");
  auto response = client->Stream(request, handler);
  REQUIRE(response.status().ToString() == "OK");
  CHECK(response->status == 404);
  CHECK(response->body == R"({"errors":[{"code":"BLOB_UNKNOWN"}]})");
  const absl::Status status = StatusOf(*response);
  CHECK(absl::IsNotFound(status));
  CHECK(Contains(status, "BLOB_UNKNOWN"));
  CHECK_FALSE(Contains(status, "secret"));
}

TEST_CASE("a Range request returns 206 and the partial body") {
  const std::string blob = "0123456789";
  TestServer server([&](const Received& r) {
    if (r.headers.Get("Range") == "bytes=4-") {
      return Reply(206, blob.substr(4), {{"Content-Range", "bytes 4-9/10"}});
    }
    return Reply(200, blob);
  });
  auto client = NewClient();
  Request request;
  request.url = server.Url("/blob");
  request.headers.Add("Range", "bytes=4-");
  auto response = client->Fetch(request);
  REQUIRE(response.status().ToString() == "OK");
  CHECK(response->status == 206);
  CHECK(response->body == "456789");
  CHECK(response->headers.Get("content-range") == "bytes 4-9/10");
  CHECK(StatusOf(*response).ok());
}

TEST_CASE("HEAD reads no body even when the response has a Content-Length") {
  TestServer server([](const Received&) {
    return Canned{{"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\nDocker-Content-Digest: d\r\n\r\n"}};
  });
  auto client = NewClient();
  Request request;
  request.method = "HEAD";
  request.url = server.Url("/v2/r/manifests/latest");
  request.timeout = milliseconds(5000);
  auto response = client->Fetch(request);
  REQUIRE(response.status().ToString() == "OK");
  CHECK(response->status == 200);
  CHECK(response->headers.Get("Content-Length") == "1234");
  CHECK(response->body.empty());
}

TEST_CASE("a redirect to another server is followed without the Authorization header") {
  TestServer storage([](const Received&) { return Reply(200, "blob bytes"); });
  TestServer registry([&](const Received&) {
    return Reply(307, "", {{"Location", storage.Url("/bucket/blob?X-Signature=abc")}});
  });
  auto client = NewClient();
  Request request;
  request.url = registry.Url("/v2/r/blobs/sha256:x");
  request.headers.Add("Authorization", "Bearer registry-token");
  request.headers.Add("Range", "bytes=0-");
  auto response = client->Fetch(request);
  REQUIRE(response.status().ToString() == "OK");
  CHECK(response->status == 200);
  CHECK(response->body == "blob bytes");
  CHECK(response->redirects == 1);
  CHECK(response->url.port == storage.port());

  REQUIRE(registry.received().size() == 1);
  CHECK(registry.received()[0].headers.Get("Authorization") == "Bearer registry-token");
  REQUIRE(storage.received().size() == 1);
  const Received hop = storage.received()[0];
  CHECK(hop.target == "/bucket/blob?X-Signature=abc");
  CHECK_FALSE(hop.headers.Has("Authorization"));
  CHECK(hop.headers.Get("Range") == "bytes=0-");
}

TEST_CASE("a redirect on the same server keeps the Authorization header") {
  TestServer server([](const Received& r) {
    if (r.target == "/old") {
      return Reply(301, "", {{"Location", "/new"}});
    }
    return Reply(200, "moved");
  });
  auto client = NewClient();
  Request request;
  request.url = server.Url("/old");
  request.headers.Add("Authorization", "Basic dTpw");
  auto response = client->Fetch(request);
  REQUIRE(response.status().ToString() == "OK");
  CHECK(response->body == "moved");
  REQUIRE(server.received().size() == 2);
  CHECK(server.received()[1].target == "/new");
  CHECK(server.received()[1].headers.Get("Authorization") == "Basic dTpw");
}

TEST_CASE("a 303 turns a POST into a GET without a body") {
  TestServer server([](const Received& r) {
    if (r.method == "POST") {
      return Reply(303, "", {{"Location", "/result"}});
    }
    return Reply(200, r.method + " " + r.target + " [" + r.body + "]");
  });
  auto client = NewClient();
  Request request;
  request.method = "POST";
  request.url = server.Url("/submit");
  request.body = "form";
  request.headers.Add("Content-Type", "application/x-www-form-urlencoded");
  auto response = client->Fetch(request);
  REQUIRE(response.status().ToString() == "OK");
  CHECK(response->body == "GET /result []");
}

TEST_CASE("redirects stop after five with FailedPrecondition") {
  TestServer server([](const Received& r) {
    return Reply(302, "", {{"Location", r.target + "x"}});
  });
  auto client = NewClient();
  Request request;
  request.url = server.Url("/loop");
  auto response = client->Fetch(request);
  REQUIRE_FALSE(response.ok());
  CHECK(absl::IsFailedPrecondition(response.status()));
  CHECK(Contains(response.status(), "5 redirects"));
  CHECK(server.received().size() == 6);
}

TEST_CASE("a redirect is returned, not followed, when the caller says so") {
  TestServer server([](const Received&) { return Reply(302, "", {{"Location", "/elsewhere"}}); });
  auto client = NewClient();
  Request request;
  request.url = server.Url("/");
  request.follow_redirects = false;
  auto response = client->Fetch(request);
  REQUIRE(response.status().ToString() == "OK");
  CHECK(response->status == 302);
  CHECK(response->headers.Get("Location") == "/elsewhere");
}

TEST_CASE("a server that never answers fails with Unavailable when the request's time is up") {
  TestServer server([](const Received&) { return Canned{{}, milliseconds(0), true}; });
  auto client = NewClient();
  Request request;
  request.url = server.Url("/v2/");
  request.timeout = milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  auto response = client->Fetch(request);
  const auto took = std::chrono::steady_clock::now() - start;
  REQUIRE_FALSE(response.ok());
  CHECK(absl::IsUnavailable(response.status()));
  CHECK(Contains(response.status(), "timed out"));
  CHECK(Contains(response.status(), "longer than 300ms"));
  CHECK(took >= milliseconds(250));
  CHECK(took < milliseconds(3000));
}

TEST_CASE("a body that stalls fails after the idle timeout though time is left overall") {
  TestServer server([](const Received&) {
    Canned c{{"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf"}};
    c.hang = true;
    return c;
  });
  auto client = NewClient();
  Request request;
  request.url = server.Url("/blob");
  request.timeout = milliseconds(20000);
  request.idle_timeout = milliseconds(200);
  const auto start = std::chrono::steady_clock::now();
  std::string got;
  BodyHandler handler;
  handler.on_data = [&](const char* data, size_t n) {
    got.append(data, n);
    return absl::OkStatus();
  };
  auto response = client->Stream(request, handler);
  REQUIRE_FALSE(response.ok());
  CHECK(absl::IsUnavailable(response.status()));
  CHECK(Contains(response.status(), "no progress for 200ms"));
  CHECK(got == "half");
  CHECK(std::chrono::steady_clock::now() - start < milliseconds(5000));
}

TEST_CASE("a body that trickles in is cut off at the request's deadline") {
  TestServer server([](const Received&) {
    std::vector<std::string> chunks(100, "x");
    return ChunkedReply(chunks, milliseconds(50));
  });
  auto client = NewClient();
  Request request;
  request.url = server.Url("/blob");
  request.timeout = milliseconds(400);
  request.idle_timeout = milliseconds(10000);
  const auto start = std::chrono::steady_clock::now();
  auto response = client->Fetch(request);
  REQUIRE_FALSE(response.ok());
  CHECK(absl::IsUnavailable(response.status()));
  CHECK(Contains(response.status(), "longer than 400ms"));
  CHECK(std::chrono::steady_clock::now() - start < milliseconds(3000));
}

TEST_CASE("a refused connection is Unavailable") {
  uint16_t port = 0;
  {
    TestServer gone([](const Received&) { return Reply(200, ""); });
    port = gone.port();
  }
  auto client = NewClient();
  Request request;
  request.url = "http://127.0.0.1:" + std::to_string(port) + "/v2/";
  auto response = client->Fetch(request);
  REQUIRE_FALSE(response.ok());
  CHECK(absl::IsUnavailable(response.status()));
  CHECK(Contains(response.status(), "connect"));
}

TEST_CASE("a body cut short of its Content-Length is Unavailable") {
  TestServer server([](const Received&) {
    Canned c{{"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"}};
    c.close = true;
    return c;
  });
  auto client = NewClient();
  Request request;
  request.url = server.Url("/blob");
  request.timeout = milliseconds(5000);
  auto response = client->Fetch(request);
  REQUIRE_FALSE(response.ok());
  CHECK(absl::IsUnavailable(response.status()));
  CHECK(Contains(response.status(), "closed early"));
}

TEST_CASE("Fetch refuses a body over the caller's limit with ResourceExhausted") {
  TestServer server([](const Received& r) {
    if (r.target == "/sized") {
      return Reply(200, std::string(2000, 'a'));
    }
    return ChunkedReply({std::string(600, 'a'), std::string(600, 'b')});
  });
  auto client = NewClient();
  for (const std::string path : {"/sized", "/chunked"}) {
    Request request;
    request.url = server.Url(path);
    request.max_body_bytes = 1000;
    auto response = client->Fetch(request);
    REQUIRE_FALSE(response.ok());
    CHECK(absl::IsResourceExhausted(response.status()));
    CHECK(Contains(response.status(), "limit of 1000"));
  }
}

TEST_CASE("a header value with a line break is refused before anything is sent") {
  TestServer server([](const Received&) { return Reply(200, ""); });
  auto client = NewClient();
  Request request;
  request.url = server.Url("/");
  request.headers.Add("X-Evil", "a\r\nInjected: yes");
  auto response = client->Fetch(request);
  REQUIRE_FALSE(response.ok());
  CHECK(absl::IsInvalidArgument(response.status()));
  CHECK(Contains(response.status(), "X-Evil"));
  CHECK(server.received().empty());
}

TEST_CASE("a URL that is not http or https is InvalidArgument") {
  auto client = NewClient();
  Request request;
  request.url = "ftp://127.0.0.1/x";
  auto response = client->Fetch(request);
  REQUIRE_FALSE(response.ok());
  CHECK(absl::IsInvalidArgument(response.status()));
}

TEST_CASE("one client serves concurrent calls") {
  TestServer a([](const Received&) { return Reply(200, "a"); });
  TestServer b([](const Received&) { return Reply(200, "b"); });
  auto client = NewClient();
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int j = 0; j < 10; ++j) {
        Request request;
        request.url = (i % 2 ? a : b).Url("/");
        auto response = client->Fetch(request);
        if (response.ok() && response->body == (i % 2 ? "a" : "b")) {
          ++ok;
        }
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  CHECK(ok == 40);
}

}  // namespace
}  // namespace kmodd::http

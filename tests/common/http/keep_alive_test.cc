#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/http/beast_client.h"
#include "common/http/cancel.h"
#include "tests/common/http/test_pki.h"
#include "tests/common/http/test_server.h"
#include "tests/eventually.h"

// ClientOptions::reuse_connections: what is kept, what is not, and what is sent again.
namespace kmodd::http {
namespace {

using std::chrono::milliseconds;
using ::kmodd::testing::Eventually;
using testing::Canned;
using testing::Received;
using testing::Reply;
using testing::TestServer;

std::unique_ptr<BeastHttpClient> NewClient(ClientOptions options = {}) {
  options.reuse_connections = true;
  auto client = BeastHttpClient::Create(std::move(options));
  REQUIRE(client.status().ToString() == "OK");
  return *std::move(client);
}

Request NewRequest(const TestServer& server, const std::string& method = "GET",
                   const std::string& body = "") {
  Request request;
  request.method = method;
  request.url = server.Url("/" + method);
  request.body = body;
  request.timeout = std::chrono::seconds(10);
  return request;
}

// Holds each request until `n` are in the server at once: only possible when the client
// sends them on `n` different connections. Answers 503 if they never all arrive.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  Canned Wait(const Received& r) {
    std::unique_lock<std::mutex> lock(mu_);
    const int round_end = (arrived_ / n_ + 1) * n_;
    ++arrived_;
    cv_.notify_all();
    if (!cv_.wait_for(lock, std::chrono::seconds(10), [&] { return arrived_ >= round_end; })) {
      return Reply(503, "alone");
    }
    return Reply(200, std::to_string(r.connection));
  }

 private:
  const int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
};

// `n` Fetches at once; their statuses.
std::vector<int> FetchAtOnce(BeastHttpClient& client, const TestServer& server, int n) {
  std::vector<int> statuses(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      auto response = client.Fetch(NewRequest(server));
      statuses[i] = response.ok() ? response->status : -1;
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  return statuses;
}

TEST_CASE("sequential Fetches to a keep-alive server go over one connection") {
  TestServer server([](const Received& r) { return Reply(200, r.method + r.body); });
  auto client = NewClient();
  for (const std::string method : {"GET", "POST", "GET", "PATCH", "PUT"}) {
    auto response = client->Fetch(NewRequest(server, method, "b"));
    REQUIRE(response.status().ToString() == "OK");
    CHECK(response->body == method + "b");
  }
  CHECK(server.accepted() == 1);
  const std::vector<Received> got = server.received();
  REQUIRE(got.size() == 5);
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].connection == 1);
    CHECK(got[i].nth == static_cast<int>(i) + 1);
  }
}

TEST_CASE("without reuse_connections every Fetch has a connection of its own") {
  TestServer server([](const Received&) { return Reply(200, "ok"); });
  auto client = BeastHttpClient::Create(ClientOptions{});
  REQUIRE(client.ok());
  for (int i = 0; i < 3; ++i) {
    REQUIRE((*client)->Fetch(NewRequest(server)).ok());
  }
  CHECK(server.accepted() == 3);
}

TEST_CASE("concurrent Fetches never share a connection, and later ones reuse them") {
  constexpr int kCalls = 4;
  Barrier barrier(kCalls);
  TestServer server([&barrier](const Received& r) { return barrier.Wait(r); }, "", "",
                    TestServer::kConcurrent);
  auto client = NewClient();
  CHECK(FetchAtOnce(*client, server, kCalls) == std::vector<int>(kCalls, 200));
  CHECK(server.accepted() == kCalls);
  CHECK(FetchAtOnce(*client, server, kCalls) == std::vector<int>(kCalls, 200));
  CHECK(server.accepted() == kCalls);
  std::set<int> second_round;
  for (const Received& r : server.received()) {
    if (r.nth == 2) {
      second_round.insert(r.connection);
    }
  }
  CHECK(second_round == std::set<int>{1, 2, 3, 4});
}

TEST_CASE("no more than max_idle_connections are kept") {
  Barrier barrier(2);
  TestServer server([&barrier](const Received& r) { return barrier.Wait(r); }, "", "",
                    TestServer::kConcurrent);
  ClientOptions options;
  options.max_idle_connections = 1;
  auto client = NewClient(options);
  CHECK(FetchAtOnce(*client, server, 2) == std::vector<int>{200, 200});
  CHECK(FetchAtOnce(*client, server, 2) == std::vector<int>{200, 200});
  CHECK(server.accepted() == 3);
}

TEST_CASE("a connection idle longer than idle_connection_timeout is not reused") {
  TestServer server([](const Received&) { return Reply(200, "ok"); });
  ClientOptions options;
  options.idle_connection_timeout = milliseconds(0);
  auto client = NewClient(options);
  REQUIRE(client->Fetch(NewRequest(server)).ok());
  REQUIRE(client->Fetch(NewRequest(server)).ok());
  CHECK(server.accepted() == 2);
}

TEST_CASE("a kept connection the server has closed is left for a new one") {
  TestServer server([](const Received&) {
    Canned c = Reply(200, "ok");
    c.close = true;  // an idle timeout on the server, without a Connection: close
    return c;
  });
  auto client = NewClient();
  REQUIRE(client->Fetch(NewRequest(server)).ok());
  REQUIRE(Eventually([&] { return server.closed() == 1; }));
  auto response = client->Fetch(NewRequest(server, "POST", "once"));
  REQUIRE(response.status().ToString() == "OK");
  CHECK(server.accepted() == 2);
  CHECK(server.received().size() == 2);  // nothing was sent into the closed connection
}

// The server closes the kept connection as the second request arrives, without a word: the
// race between a server's idle timeout and the client's next request.
TEST_CASE("a request the server drops unanswered on a kept connection is sent once more") {
  const testing::Pki pki = testing::MakePki("IP:127.0.0.1");
  for (const bool tls : {false, true}) {
    for (const std::string method : {"GET", "POST", "PATCH"}) {
      INFO((tls ? "https " : "http ") << method);
      TestServer server(
          [](const Received& r) {
            return r.connection == 1 && r.nth == 2 ? Canned{{}, milliseconds(0), false, true}
                                                   : Reply(200, r.method + r.body);
          },
          tls ? pki.cert_pem : "", tls ? pki.key_pem : "");
      ClientOptions options;
      options.tls.ca_pem = pki.ca_pem;
      auto client = NewClient(options);
      REQUIRE(client->Fetch(NewRequest(server)).ok());
      auto response = client->Fetch(NewRequest(server, method, "x"));
      REQUIRE(response.status().ToString() == "OK");
      CHECK(response->body == method + "x");
      CHECK(server.accepted() == 2);
      const std::vector<Received> got = server.received();
      REQUIRE(got.size() == 3);
      CHECK(got[1].connection == 1);
      CHECK(got[2].connection == 2);
      CHECK(got[2].method == method);
    }
  }
}

TEST_CASE("a request cut off after part of its response is not sent again") {
  for (const std::string method : {"GET", "POST"}) {
    INFO(method);
    TestServer server([](const Received& r) {
      return r.nth == 2 ? Canned{{"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"},
                                 milliseconds(0), false, true}
                        : Reply(200, "ok");
    });
    auto client = NewClient();
    REQUIRE(client->Fetch(NewRequest(server)).ok());
    auto response = client->Fetch(NewRequest(server, method, "x"));
    CHECK(absl::IsUnavailable(response.status()));
    CHECK(server.received().size() == 2);
    CHECK(server.accepted() == 1);
  }
}

TEST_CASE("a Connection: close from either side keeps the connection from being reused") {
  SECTION("in the response") {
    TestServer server([](const Received&) { return Reply(200, "ok", {{"Connection", "close"}}); });
    auto client = NewClient();
    for (int i = 0; i < 3; ++i) {
      REQUIRE(client->Fetch(NewRequest(server)).ok());
    }
    CHECK(server.accepted() == 3);
  }
  SECTION("in the request") {
    TestServer server([](const Received&) { return Reply(200, "ok"); });
    auto client = NewClient();
    for (int i = 0; i < 3; ++i) {
      Request request = NewRequest(server);
      request.headers.Set("Connection", "close");
      REQUIRE(client->Fetch(request).ok());
    }
    CHECK(server.accepted() == 3);
  }
}

TEST_CASE("a connection whose Fetch failed is not reused") {
  SECTION("a body over the limit, left unread") {
    TestServer server([](const Received& r) {
      return Reply(200, r.connection == 1 ? "far too long" : "ok");
    });
    auto client = NewClient();
    Request request = NewRequest(server);
    request.max_body_bytes = 4;
    CHECK(absl::IsResourceExhausted(client->Fetch(request).status()));
    REQUIRE(client->Fetch(NewRequest(server)).ok());
    CHECK(server.accepted() == 2);
  }
  SECTION("a body that stalls past the idle timeout") {
    TestServer server([](const Received& r) {
      if (r.connection == 1) {
        return Canned{{"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"}, milliseconds(0), true};
      }
      return Reply(200, "ok");
    });
    auto client = NewClient();
    Request request = NewRequest(server);
    request.idle_timeout = milliseconds(200);
    CHECK(absl::IsUnavailable(client->Fetch(request).status()));
    auto response = client->Fetch(NewRequest(server));
    REQUIRE(response.status().ToString() == "OK");
    CHECK(server.accepted() == 2);
    CHECK(server.received().size() == 2);  // the timed-out one was not sent again
  }
}

TEST_CASE("a cancelled Fetch's connection is not reused, nor the call sent again") {
  TestServer server([](const Received& r) {
    return r.nth == 2 ? Canned{{}, milliseconds(0), true} : Reply(200, "ok");
  });
  auto client = NewClient();
  REQUIRE(client->Fetch(NewRequest(server)).ok());
  Cancellation cancel;
  std::thread canceller([&] {
    Eventually([&] { return server.received().size() == 2; });
    cancel.Cancel();
  });
  Request request = NewRequest(server);
  request.cancel = &cancel;
  auto cancelled = client->Fetch(request);
  canceller.join();
  CHECK(cancelled.status().code() == absl::StatusCode::kCancelled);
  REQUIRE(client->Fetch(NewRequest(server)).ok());
  const std::vector<Received> got = server.received();
  REQUIRE(got.size() == 3);
  CHECK(got[2].connection == 2);
  CHECK(server.accepted() == 2);
}

TEST_CASE("cancelling a finished call does not disturb the next call on its connection") {
  TestServer server([](const Received&) { return Reply(200, "ok"); });
  auto client = NewClient();
  Cancellation cancel;
  Request first = NewRequest(server);
  first.cancel = &cancel;
  REQUIRE(client->Fetch(first).ok());
  cancel.Cancel();
  auto response = client->Fetch(NewRequest(server));
  REQUIRE(response.status().ToString() == "OK");
  CHECK(server.received().at(1).nth == 2);
  CHECK(server.accepted() == 1);
}

TEST_CASE("Stream neither takes nor leaves a kept connection") {
  TestServer server([](const Received&) { return Reply(200, "ok"); }, "", "",
                    TestServer::kConcurrent);
  auto client = NewClient();
  REQUIRE(client->Fetch(NewRequest(server)).ok());
  BodyHandler handler;
  handler.on_data = [](const char*, size_t) { return absl::OkStatus(); };
  REQUIRE(client->Stream(NewRequest(server), handler).ok());
  REQUIRE(client->Fetch(NewRequest(server)).ok());
  REQUIRE(client->Fetch(NewRequest(server)).ok());
  const std::vector<Received> got = server.received();
  REQUIRE(got.size() == 4);
  CHECK(got[1].connection == 2);  // the stream's own
  CHECK(got[2].connection == 1);
  CHECK(got[3].connection == 1);
  CHECK(server.accepted() == 2);
}

TEST_CASE("kept HTTPS connections make one TLS handshake for many calls") {
  const testing::Pki pki = testing::MakePki("IP:127.0.0.1");
  TestServer server([](const Received&) { return Reply(200, "secure"); }, pki.cert_pem,
                    pki.key_pem);
  ClientOptions options;
  options.tls.ca_pem = pki.ca_pem;
  auto client = NewClient(options);
  for (int i = 0; i < 5; ++i) {
    auto response = client->Fetch(NewRequest(server, i % 2 == 0 ? "GET" : "PATCH", "p"));
    REQUIRE(response.status().ToString() == "OK");
    CHECK(response->body == "secure");
  }
  CHECK(server.accepted() == 1);
}

}  // namespace
}  // namespace kmodd::http

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>

#include "common/http/beast_client.h"
#include "common/http/cancel.h"
#include "tests/common/http/test_server.h"

namespace kmodd::http {
namespace {

using testing::Canned;
using testing::Received;
using testing::TestServer;

std::unique_ptr<BeastHttpClient> NewClient() {
  auto client = BeastHttpClient::Create(ClientOptions{});
  REQUIRE(client.status().ToString() == "OK");
  return *std::move(client);
}

TEST_CASE("Cancel from another thread ends a silent stream at once") {
  TestServer server([](const Received&) {
    Canned c;
    c.pieces = {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"};
    c.hang = true;
    return c;
  });
  auto client = NewClient();
  Cancellation cancel;
  Request request;
  request.url = server.Url("/watch");
  request.cancel = &cancel;
  std::string got;
  BodyHandler handler;
  handler.on_data = [&got](const char* data, size_t n) {
    got.append(data, n);
    return absl::OkStatus();
  };
  std::thread canceller([&cancel] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel.Cancel();
  });
  const auto start = std::chrono::steady_clock::now();
  auto response = client->Stream(request, handler);
  canceller.join();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(response.status().code() == absl::StatusCode::kCancelled);
  CHECK(got == "hello");
}

TEST_CASE("A call started after Cancel fails without connecting") {
  int calls = 0;
  TestServer server([&calls](const Received&) {
    ++calls;
    return testing::Reply(200, "ok");
  });
  auto client = NewClient();
  Cancellation cancel;
  cancel.Cancel();
  Request request;
  request.url = server.Url("/");
  request.cancel = &cancel;
  auto response = client->Fetch(request);
  CHECK(response.status().code() == absl::StatusCode::kCancelled);
  CHECK(calls == 0);
}

TEST_CASE("An uncancelled Cancellation does not disturb calls") {
  TestServer server([](const Received&) { return testing::Reply(200, "ok"); });
  auto client = NewClient();
  Cancellation cancel;
  Request request;
  request.url = server.Url("/");
  request.cancel = &cancel;
  for (int i = 0; i < 3; ++i) {
    auto response = client->Fetch(request);
    REQUIRE(response.ok());
    CHECK(response->body == "ok");
  }
}

TEST_CASE("Cancellation::WaitFor returns early when cancelled") {
  Cancellation cancel;
  CHECK_FALSE(cancel.WaitFor(std::chrono::milliseconds(1)));
  std::thread canceller([&cancel] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cancel.Cancel();
  });
  const auto start = std::chrono::steady_clock::now();
  CHECK(cancel.WaitFor(std::chrono::seconds(30)));
  canceller.join();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK(cancel.WaitFor(std::chrono::seconds(30)));
}

}  // namespace
}  // namespace kmodd::http

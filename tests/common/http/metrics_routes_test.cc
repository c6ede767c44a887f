// The agent's metrics and health endpoints on common/http's server, over the wire, as
// run_cmd.cc starts them.

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "common/http/server.h"
#include "common/http/metrics_routes.h"
#include "tests/common/http/raw_client.h"

namespace kmodd::http {
namespace {

using kmodd::testing::RawClient;
using kmodd::testing::TestResponse;
using kmodd::testing::Wire;

TEST_CASE("the agent serves /metrics and /healthz in plain HTTP on its metrics address",
          "[server]") {
  std::atomic<bool> healthy{true};
  Logger log(stderr, LogLevel::kWarn);
  absl::StatusOr<std::unique_ptr<http::Server>> server = http::Server::Start(
      MetricsServerOptions("127.0.0.1:0"),
      MetricsRoutes({[] { return std::string("kmodd_agent_reconciles_total 3\n"); },
                     [&] { return healthy.load(); }}),
      log);
  REQUIRE(server.ok());
  RawClient c("127.0.0.1", std::chrono::seconds(10), Wire::kPlain);
  REQUIRE(c.Open((*server)->port()));
  auto get = [&](const std::string& path) {
    REQUIRE(c.Send("GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    std::optional<TestResponse> r = c.Receive();
    REQUIRE(r);
    return *r;
  };
  const TestResponse metrics = get("/metrics");
  CHECK(metrics.status == 200);
  CHECK(metrics.body == "kmodd_agent_reconciles_total 3\n");
  CHECK(metrics.head.find("content-type: text/plain; version=0.0.4") != std::string::npos);
  CHECK(get("/healthz").status == 200);
  healthy = false;
  CHECK(get("/healthz").status == 503);  // on the same kept-alive connection
  CHECK(get("/other").status == 404);

  // A scraper's endpoint takes no body: one past 64 KiB is refused as it arrives.
  RawClient big("127.0.0.1", std::chrono::seconds(10), Wire::kPlain);
  REQUIRE(big.Open((*server)->port()));
  REQUIRE(big.Send(kmodd::testing::PostRequest(std::string(100 << 10, 'x'), "/metrics")));
  const std::optional<TestResponse> r = big.Receive();
  REQUIRE(r);
  CHECK(r->status == 413);
}

TEST_CASE("the agent's metrics address takes ADDR:PORT, loopback for a bare :PORT", "[server]") {
  Logger log(stderr, LogLevel::kError);
  CHECK(http::Server::Start(MetricsServerOptions("nonsense"), MetricsRoutes({}), log)
            .status()
            .code() == absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<http::Server>> bare =
      http::Server::Start(MetricsServerOptions(":0"), MetricsRoutes({}), log);
  REQUIRE(bare.ok());
  RawClient c("127.0.0.1", std::chrono::seconds(10), Wire::kPlain);
  CHECK(c.Open((*bare)->port()));
}

}  // namespace
}  // namespace kmodd::http

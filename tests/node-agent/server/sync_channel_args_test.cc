// The agent's Sync channel arguments: fast reconnects without a short connect deadline
// (issue 12 item C).

#include <catch2/catch.hpp>

#include <grpc/grpc.h>

#include <chrono>
#include <optional>
#include <string>

#include "node-agent/server/sync_channel_args.h"

namespace kmodd::agent {
namespace {

using std::chrono::milliseconds;

std::optional<int> IntArg(const grpc::ChannelArguments& args, const std::string& key) {
  grpc_channel_args c_args;
  args.SetChannelArgs(&c_args);
  for (size_t i = 0; i < c_args.num_args; ++i) {
    if (key == c_args.args[i].key && c_args.args[i].type == GRPC_ARG_INTEGER) {
      return c_args.args[i].value.integer;
    }
  }
  return std::nullopt;
}

TEST_CASE("the sync channel retries after the short backoff but gives each attempt 20 s") {
  const BackoffPolicy policy{milliseconds(100), milliseconds(30000)};
  const grpc::ChannelArguments args = SyncChannelArguments(policy);
  CHECK(IntArg(args, GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS) == 100);
  CHECK(IntArg(args, GRPC_ARG_MAX_RECONNECT_BACKOFF_MS) == 30000);
  // gRPC reads MIN_RECONNECT_BACKOFF as the least time a connection attempt is allowed:
  // a 100 ms one cut off every TLS handshake slower than that.
  const std::optional<int> min_connect = IntArg(args, GRPC_ARG_MIN_RECONNECT_BACKOFF_MS);
  REQUIRE(min_connect.has_value());
  CHECK(*min_connect == 20000);
  CHECK(*min_connect != policy.initial.count());
}

TEST_CASE("the sync channel's connect deadline does not follow a longer backoff either") {
  const grpc::ChannelArguments args =
      SyncChannelArguments(BackoffPolicy{milliseconds(5), milliseconds(200)});
  CHECK(IntArg(args, GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS) == 5);
  CHECK(IntArg(args, GRPC_ARG_MAX_RECONNECT_BACKOFF_MS) == 200);
  CHECK(IntArg(args, GRPC_ARG_MIN_RECONNECT_BACKOFF_MS) == kSyncMinConnectTimeoutMs);
}

TEST_CASE("the sync channel pings a quiet connection to find a vanished controller") {
  const grpc::ChannelArguments args = SyncChannelArguments(BackoffPolicy{});
  CHECK(IntArg(args, GRPC_ARG_KEEPALIVE_TIME_MS) == 30000);
  CHECK(IntArg(args, GRPC_ARG_KEEPALIVE_TIMEOUT_MS) == 20000);
  CHECK(IntArg(args, GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA) == 0);
}

}  // namespace
}  // namespace kmodd::agent

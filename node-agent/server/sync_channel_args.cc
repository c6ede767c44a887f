#include "node-agent/server/sync_channel_args.h"

#include <grpc/grpc.h>

namespace kmodd::agent {

namespace {

// Keepalive pings find a controller that vanished without closing the connection (a
// rescheduled pod, a dead host), so that the agent dials again. The controller's Sync
// server accepts a ping every 10 s without data (controller/server/sync_server.cc).
constexpr int kKeepaliveMs = 30 * 1000;
constexpr int kKeepaliveTimeoutMs = 20 * 1000;

}  // namespace

grpc::ChannelArguments SyncChannelArguments(const BackoffPolicy& backoff) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, static_cast<int>(backoff.initial.count()));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, static_cast<int>(backoff.max.count()));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kSyncMinConnectTimeoutMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // the stream is quiet when all is well
  return args;
}

}  // namespace kmodd::agent

#pragma once

// The channel arguments of the agent's Sync channel, in one place so that a test can read
// them and kmodd-loadgen can dial with exactly the agent's (tools/bench/reconnect).

#include <grpcpp/support/channel_arguments.h>

#include "node-agent/server/backoff.h"

namespace kmodd::agent {

// gRPC's GRPC_ARG_MIN_RECONNECT_BACKOFF_MS is not a backoff bound: it is the minimum time
// a connection attempt (TCP + TLS + HTTP/2 settings) is given before it is cut off and
// retried (gRPC's min_connect_timeout). Its default, 20 s, is kept on purpose: set to the
// 100 ms backoff, it cut off every handshake slower than that (a qemu guest took 1 to 3
// failed attempts before each first connection; a fleet dialling a restarted controller at
// once cut its own handshakes in a loop). Issue 12 item C.
inline constexpr int kSyncMinConnectTimeoutMs = 20 * 1000;

// Fast reconnects (the first retry after backoff.initial, doubling up to backoff.max), a
// 20 s connect deadline per attempt, and keepalive pings that find a vanished controller.
grpc::ChannelArguments SyncChannelArguments(const BackoffPolicy& backoff);

}  // namespace kmodd::agent

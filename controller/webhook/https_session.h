#pragma once

// One connection of the webhook's HTTPS server (https_server.h), internal to it: the TLS
// handshake, then each request read on the I/O thread, reviewed on the worker pool, and
// answered on the I/O thread again.

#include <algorithm>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "common/log.h"
#include "controller/webhook/https_server.h"
#include "controller/webhook/limits.h"
#include "controller/webhook/review_pool.h"

namespace kmodd::webhook {

// What the acceptor and the sessions share. Each session holds it, so it outlives them.
struct ServerShared {
  ServerShared(HttpsOptions o, HttpsHandler h, Logger& l)
      : options(std::move(o)), handler(std::move(h)), log(l),
        limiter(options.max_connections, options.max_connections_per_peer),
        budget(std::max(options.body_memory, options.body_limit)) {}

  const HttpsOptions options;
  const HttpsHandler handler;
  Logger& log;
  ConnectionLimiter limiter;
  BodyBudget budget;
  ReviewPool pool;
  std::atomic<uint64_t> accepts{0};
  std::atomic<uint64_t> accept_errors{0};
  std::atomic<uint64_t> refused{0};
};

// Serves `socket` (accepted on a strand of the server's io_context) until the client or a
// timeout ends it; `slot` goes back when it ends. `peer` is the client's address.
void StartSession(boost::asio::ip::tcp::socket socket,
                  std::shared_ptr<boost::asio::ssl::context> context,
                  std::shared_ptr<ServerShared> shared, ConnectionLimiter::Slot slot,
                  std::string peer);

}  // namespace kmodd::webhook

#pragma once

// The connections of common/http's server (server.h), internal to it: each request read on
// the I/O thread, handled there or on the worker pool, and answered on the I/O thread again.
// Only common/http/server*.cc include this.

#include <algorithm>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/http/router.h"
#include "common/http/server.h"
#include "common/http/server_limits.h"
#include "common/http/worker_pool.h"
#include "common/log.h"

namespace kmodd::http {

struct TlsServerContext {
  boost::asio::ssl::context context{boost::asio::ssl::context::tls_server};
};

// A connection as the server sees it at Stop. Not "Connection": the client's pool
// (beast_pool.h) has a kmodd::http::Connection, and two classes of one name in one library
// break the one-definition rule (a Debug build ran the client's destructor on sessions).
class ServerConnection {
 public:
  virtual ~ServerConnection() = default;
  // From any thread: ends the connection once its current request is answered, at once
  // when it waits for one.
  virtual void Shutdown() = 0;
};

// What the acceptor and the connections share. Each connection holds it, so it outlives
// them.
struct ServerShared {
  ServerShared(ServerOptions o, Router r, Logger& l)
      : options(std::move(o)), routes(std::move(r)), log(l),
        limiter(options.max_connections, options.max_connections_per_peer),
        budget(std::max(options.body_memory, options.body_limit)) {}

  // The registry Stop walks; a connection leaves it when destroyed.
  uint64_t Register(const std::weak_ptr<ServerConnection>& c);
  void Unregister(uint64_t id);
  std::vector<std::shared_ptr<ServerConnection>> Connections();

  const ServerOptions options;
  const Router routes;
  Logger& log;
  ConnectionLimiter limiter;
  BodyBudget budget;
  WorkerPool pool;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> accepts{0};
  std::atomic<uint64_t> accept_errors{0};
  std::atomic<uint64_t> refused{0};

 private:
  std::mutex mu_;
  uint64_t next_id_ = 0;                                        // guarded by mu_
  std::unordered_map<uint64_t, std::weak_ptr<ServerConnection>> all_;  // guarded by mu_
};

// Serves `socket` (accepted on a strand of the server's io_context) until the client, a
// timeout or Stop ends it; `slot` goes back when it ends. `peer` is the client's address.
// `tls` null: plain HTTP.
void StartSession(boost::asio::ip::tcp::socket socket, std::shared_ptr<TlsServerContext> tls,
                  std::shared_ptr<ServerShared> shared, ConnectionLimiter::Slot slot,
                  std::string peer);

}  // namespace kmodd::http

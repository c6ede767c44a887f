#pragma once

// One HTTP/1.1 server on Boost.Beast for every binary: the controller's admission webhook
// (over TLS, its certificate rotated while it runs) and the agent's metrics and health (plain
// HTTP). Requests go to a Router's handlers by method and path; keep-alive.
//
// Anyone who reaches the port is a client, so what one client can hold is bounded: one I/O
// thread accepts, reads and writes; handlers that may take long run on a few worker threads,
// where a large body never occupies all of them; connections are capped in all and per
// client address (past a cap a new connection is closed at once); each request must arrive
// within its timeouts (an idle or trickling client is closed); headers past their limit are
// answered 431, a body past its limit 413 as it arrives, a request that does not parse 400;
// large bodies are read only within a memory budget; when accept fails (file descriptors
// exhausted) the server backs off, 10 ms doubling to 1 s, instead of retrying at once; and
// no exception of a handler leaves the server (the client gets a 500).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/http/router.h"
#include "common/http/server_tls.h"
#include "common/log.h"

namespace kmodd::http {

struct ServerOptions {
  std::string name = "http";            // starts its log lines: "webhook", "metrics"
  std::string listen = "0.0.0.0:9443";  // ADDR:PORT; port 0 picks a free one
  std::string default_host = "0.0.0.0";  // for a listen address of ":PORT"
  TlsContextSource tls;                  // empty: plain HTTP
  size_t body_limit = 3 << 20;           // the API server caps its requests at 3 MiB too
  size_t header_limit = 16 << 10;
  // Until a request's headers are in: from accept (the TLS handshake included), or from
  // the previous response on a kept-alive connection. Then its body, then the response.
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds body_timeout{10000};
  std::chrono::milliseconds write_timeout{10000};
  int max_connections = 256;           // open at once; past it a new one is closed at once
  int max_connections_per_peer = 128;  // the same for one client address
  int workers = 2;  // threads for RunOn::kWorkers routes (none started without such a route)
  // A body past `large_body` (by Content-Length, or any chunked one) is read only when its
  // size fits in `body_memory` beside the other large bodies held; its handler runs on at
  // most workers - 1 threads.
  size_t large_body = 128 << 10;
  size_t body_memory = 32 << 20;
  // At Stop, how long requests already read may take to be answered.
  std::chrono::milliseconds stop_grace{5000};
};

// Counters since Start, for tests and logs.
struct ServerStats {
  uint64_t accepts = 0;        // accept calls that completed, failed ones included
  uint64_t accept_errors = 0;  // of which failed (EMFILE, ENFILE, ...)
  uint64_t refused = 0;        // connections closed at once, over a cap
  int connections = 0;         // open now
};

class Server {
 public:
  // Listens, and serves on threads of its own until Stop.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options,
                                                                     Router routes, Logger& log);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  uint16_t port() const;
  ServerStats stats() const;

  // Accepts no more connections, closes the idle ones, lets the requests already read be
  // answered (within stop_grace), then ends the threads. Idempotent.
  void Stop();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kmodd::http

#pragma once

// A small HTTPS/1.1 server on Boost.Beast and OpenSSL for the admission webhook: TLS 1.2 or
// later, keep-alive (the API server reuses connections). Its certificate can be replaced
// while it runs: each new connection takes the context in force when it is accepted, so a
// rotated serving certificate takes effect without a restart.
//
// Anyone who reaches the port is a client, so what one client can hold is bounded: the I/O
// thread only accepts, reads and writes; the handler runs on a few worker threads, where a
// large body may never occupy all of them; connections are capped in all and per client
// address (past a cap a new connection is closed at once); each request must arrive within
// its timeouts; a body over the limit is answered 413 as it arrives; large bodies are read
// only within a memory budget; and when accept fails (file descriptors exhausted) the
// server backs off, 10 ms doubling to 1 s, instead of retrying at once.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/log.h"

namespace kmodd::webhook {

struct HttpsReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

// Called for each request on one of the server's worker threads, concurrently with other
// requests; it may take a while (a 3 MiB review) without delaying the others.
using HttpsHandler =
    std::function<HttpsReply(const std::string& method, const std::string& target,
                             const std::string& body)>;

struct HttpsOptions {
  std::string listen = "0.0.0.0:9443";  // ADDR:PORT; port 0 picks a free one
  size_t body_limit = 3 << 20;          // the API server caps requests at 3 MiB too
  // Until a request's headers are in: from accept (the TLS handshake included), or from
  // the previous response on a kept-alive connection. Then its body, then the response.
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds body_timeout{10000};
  std::chrono::milliseconds write_timeout{10000};
  int max_connections = 256;           // open at once; past it a new one is closed at once
  int max_connections_per_peer = 128;  // the same for one client address
  int workers = 2;                     // threads that run the handler
  // A body past `large_body` (by Content-Length, or any chunked one) is read only when its
  // size fits in `body_memory` beside the other large bodies held; its review runs on at
  // most workers - 1 threads.
  size_t large_body = 128 << 10;
  size_t body_memory = 32 << 20;
};

// Counters since Start, for tests and logs.
struct HttpsStats {
  uint64_t accepts = 0;        // accept calls that completed, failed ones included
  uint64_t accept_errors = 0;  // of which failed (EMFILE, ENFILE, ...)
  uint64_t refused = 0;        // connections closed at once, over a cap
  int connections = 0;         // open now
};

class HttpsServer {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<HttpsServer>> Start(
      const HttpsOptions& options, const std::string& cert_pem, const std::string& key_pem,
      HttpsHandler handler, Logger& log);
  ~HttpsServer();
  HttpsServer(const HttpsServer&) = delete;
  HttpsServer& operator=(const HttpsServer&) = delete;

  // New connections present this certificate; open ones keep theirs. InvalidArgument for a
  // pair that does not load (the old one stays).
  [[nodiscard]] absl::Status SetCertificate(const std::string& cert_pem, const std::string& key_pem);
  uint16_t port() const;
  HttpsStats stats() const;
  void Stop();

  struct Impl;

 private:
  explicit HttpsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The webhook's routes: POST /validate-module (AdmissionReview in, out); 404, 405 or 400
// otherwise. Pure, tested without sockets.
HttpsReply RouteWebhook(const std::string& method, const std::string& target,
                        const std::string& body);

}  // namespace kmodd::webhook

#pragma once

// A small HTTPS/1.1 server on Boost.Beast and OpenSSL for the admission webhook: TLS 1.2 or
// later, bounded request size and time, keep-alive (the API server reuses connections).
// Its certificate can be replaced while it runs: each new connection takes the context in
// force when it is accepted, so a rotated serving certificate takes effect without a restart.

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

// Called on the server's thread for each request; must not block.
using HttpsHandler =
    std::function<HttpsReply(const std::string& method, const std::string& target,
                             const std::string& body)>;

struct HttpsOptions {
  std::string listen = "0.0.0.0:9443";  // ADDR:PORT; port 0 picks a free one
  size_t body_limit = 3 << 20;          // the API server caps requests at 3 MiB too
  int timeout_seconds = 10;             // per handshake, per request read, per write
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
  void Stop();

  struct Impl;

 private:
  explicit HttpsServer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

// The webhook's routes: POST /validate-module (AdmissionReview in, out); 404, 405 or 400
// otherwise. Pure, tested without sockets.
HttpsReply RouteWebhook(const std::string& method, const std::string& target,
                        const std::string& body);

}  // namespace kmodd::webhook

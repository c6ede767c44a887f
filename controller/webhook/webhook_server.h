#pragma once

// The Module admission webhook on common/http's server (server.h), over TLS: its route, and
// the serving certificate, which can be replaced while it runs. Each new connection takes the
// certificate in force when it is accepted, so a rotated one takes effect without a restart.
// The limits on what a client can hold are the server's (ServerOptions).

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/http/router.h"
#include "common/http/server.h"
#include "common/log.h"

namespace kmodd::webhook {

// POST /validate-module: an AdmissionReview in, its answer out (400 for what is not one),
// reviewed on the server's worker threads (a 3 MiB review costs seconds). 404 or 405
// otherwise. Pure: tested without sockets through Router::Route.
http::Router Routes();

class WebhookServer {
 public:
  // Serves Routes() on `options` (their name becomes "webhook") with this certificate.
  // InvalidArgument for a pair that does not load.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<WebhookServer>> Start(
      http::ServerOptions options, const std::string& cert_pem, const std::string& key_pem,
      Logger& log);
  ~WebhookServer();
  WebhookServer(const WebhookServer&) = delete;
  WebhookServer& operator=(const WebhookServer&) = delete;

  // New connections present this certificate; open ones keep theirs. InvalidArgument for a
  // pair that does not load (the old one stays).
  [[nodiscard]] absl::Status SetCertificate(const std::string& cert_pem,
                                            const std::string& key_pem);
  uint16_t port() const;
  http::ServerStats stats() const;
  void Stop();

 private:
  WebhookServer() = default;
  std::shared_ptr<http::TlsServerContext> Context();

  std::mutex mu_;
  std::shared_ptr<http::TlsServerContext> context_;  // guarded by mu_
  std::unique_ptr<http::Server> server_;  // last: it calls Context() until stopped
};

}  // namespace kmodd::webhook

#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "common/http/client.h"

namespace kmodd::http {

struct TlsOptions {
  // Trust the system's CAs (/etc/ssl/certs, OpenSSL's default paths).
  bool use_system_cas = true;
  // Also trust the CAs in this PEM file (a registry's private CA, KMM's registryTLS CA).
  std::string ca_file;
  // Also trust these PEM CAs (a kubeconfig's certificate-authority-data, decoded).
  std::string ca_pem;
  // Accept any certificate and any name. Still TLS, but no protection against an attacker
  // on the path: only for registries the caller has been told to trust this way.
  bool insecure_skip_verify = false;
  // A client certificate chain and its private key (PEM), presented when the server asks:
  // a kubeconfig's client-certificate-data and client-key-data. Both or neither.
  std::string client_cert_pem;
  std::string client_key_pem;
};

struct ClientOptions {
  TlsOptions tls;
  Duration timeout = std::chrono::minutes(10);       // default for Request::timeout
  Duration idle_timeout = std::chrono::seconds(30);  // default for Request::idle_timeout
  int max_redirects = 5;
  // An https URL redirecting to plain http is refused unless this is set.
  bool allow_redirect_to_http = false;
  std::string user_agent = "kmodd";
  // Fetch() keeps a connection open after a complete keep-alive response and sends the next
  // call to the same scheme, host and port over it (Stream() never does: a watch or a blob
  // download has its connection to itself). A call that finds its kept connection closed by
  // the server before any byte of the response is sent again once on a new connection. Off
  // by default: an image pull makes few, large calls to hosts that redirect to one another.
  bool reuse_connections = false;
  size_t max_idle_connections = 32;
  // A kept connection idle this long is closed rather than reused (servers close theirs).
  Duration idle_connection_timeout = std::chrono::seconds(30);
};

// HttpClient on Boost.Beast and OpenSSL. One connection per call, closed at its end, unless
// ClientOptions::reuse_connections (then Fetch() keeps idle connections, thread-safely).
// Server names are verified against the certificate's DNS names, IP literals against its IP
// addresses; SNI is sent for names. Names resolve through getaddrinfo, which the timeouts
// cannot interrupt; IP literals connect directly.
class BeastHttpClient final : public HttpClient {
 public:
  // InvalidArgument when a CA bundle cannot be loaded.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<BeastHttpClient>> Create(
      ClientOptions options);
  ~BeastHttpClient() override;

  [[nodiscard]] absl::StatusOr<Response> Fetch(const Request& request) override;
  [[nodiscard]] absl::StatusOr<Response> Stream(const Request& request,
                                                const BodyHandler& handler) override;

  struct Tls;   // the OpenSSL context, shared by all calls
  class Pool;   // idle keep-alive connections, shared by all calls

 private:
  BeastHttpClient(ClientOptions options, std::unique_ptr<Tls> tls);
  absl::StatusOr<Response> Do(const Request& request, const BodyHandler* handler);

  const ClientOptions options_;
  absl::StatusOr<Tls*> TlsContext();  // made at the first https hop

  std::mutex tls_mu_;
  std::unique_ptr<Tls> tls_;
  std::unique_ptr<Pool> pool_;  // null unless reuse_connections; its connections use tls_
};

}  // namespace kmodd::http

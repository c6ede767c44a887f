#pragma once

// The Controller gRPC service (proto/kmodd/v1/sync.proto) on gRPC's callback API: one
// reactor per agent stream, no thread per stream, so that thousands of agents cost memory
// for their streams only. Each stream: the first report must carry NodeInfo (the hello);
// with TLS, the node name must be the client certificate's (its CN or a DNS SAN), or, in
// Kubernetes mode, the node its bearer token is bound to (ServerOptions::authenticator;
// certificates are then not accepted), or the stream ends with PERMISSION_DENIED
// (UNAUTHENTICATED without a valid credential). Then the Hub decides what the node is
// sent. What one client can hold open is bounded (SyncLimits).

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/clock.h"
#include "common/log.h"
#include "controller/server/authenticator.h"
#include "controller/server/hub.h"

namespace grpc {
class Server;
namespace experimental {
class CertificateProviderInterface;
}  // namespace experimental
}  // namespace grpc

namespace kmodd::server {

// What one client may hold (issue 12 A1, B2). An agent needs one stream on one connection.
struct SyncLimits {
  // TokenReviews in flight, and hellos waiting for one; a hello beyond both is refused
  // with UNAVAILABLE (the agent retries with backoff).
  int review_workers = 4;
  int review_queue = 64;
  // HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS: a client's further streams wait for a slot.
  int max_streams_per_connection = 100;
  // Connections carrying streams from one peer address; a stream on a further connection
  // is refused with RESOURCE_EXHAUSTED. 0: no limit. Nodes have an address each; tests
  // and benchmarks that run many agents from 127.0.0.1 raise it.
  int max_connections_per_peer = 64;
  // A connection must finish its TLS handshake this fast, and one without streams is
  // closed after max_idle.
  std::chrono::milliseconds handshake_timeout{10'000};
  std::chrono::milliseconds max_idle{60'000};
  // Token mode only: connections are closed (GOAWAY) after this age, ±10% (gRPC's jitter),
  // and their streams cancelled after the grace: below the agent token's lifetime (one
  // hour in deploy/), so that every agent is reviewed again at least this often even if
  // its token carries no readable expiry. Each stream also ends at its token's expiry.
  std::chrono::milliseconds max_connection_age{std::chrono::minutes(30)};
  std::chrono::milliseconds max_connection_age_grace{std::chrono::seconds(30)};
};

struct ServerOptions {
  std::string listen = "127.0.0.1:7443";  // host:port; port 0 picks a free one
  // mTLS (PEM text): the server's certificate and key, and the CA that signs agents'
  // certificates. Empty only with `insecure`.
  std::string cert_pem;
  std::string key_pem;
  std::string ca_pem;
  // The same as files, instead of the PEM text: read again every `reload_every`, so that
  // a certificate replaced on disk (rename a new file into place) is served from the next
  // connection on, without a restart. With PEM text the server keeps it in files of its own
  // (a private temporary directory) that SetCertificate replaces.
  std::string cert_file, key_file, ca_file;
  std::chrono::seconds reload_every{60};
  bool insecure = false;  // plain text, no identity check: tests and demos only
  // Kubernetes mode (not owned; null: mTLS only). Every stream must then carry
  // `authorization: Bearer TOKEN` metadata, which this checks against the hello's node
  // name, off gRPC's threads (SyncLimits::review_workers).
  // In that mode client certificates are not requested: the controller's CA signs its own
  // serving certificate, and a token is the only credential an agent can show.
  Authenticator* authenticator = nullptr;
  SyncLimits limits;
  // Not owned; null: the real clock. Token expiries are read on it.
  const Clock* clock = nullptr;
};

// The identity rule: `claimed` must equal one of the certificate's common names or DNS
// subject alternative names. PermissionDenied otherwise, naming both sides.
[[nodiscard]] absl::Status CheckIdentity(const std::string& claimed,
                                         const std::vector<std::string>& common_names,
                                         const std::vector<std::string>& dns_names);

class SyncServer {
 public:
  SyncServer(Hub& hub, ServerOptions options, Logger& log);
  ~SyncServer();
  SyncServer(const SyncServer&) = delete;
  SyncServer& operator=(const SyncServer&) = delete;

  // Binds and starts serving. Unavailable when the address cannot be bound.
  [[nodiscard]] absl::Status Start();
  // The port bound (after Start): what port 0 became.
  int port() const { return port_; }
  // Ends every stream (agents reconnect to the next controller) and stops.
  void Shutdown();
  // A renewed certificate (the same CA, or a new one for clients): new connections get it
  // within reload_every; streams already open keep theirs. FailedPrecondition when the
  // server was given files (replace those instead) or is insecure.
  [[nodiscard]] absl::Status SetCertificate(const std::string& cert_pem,
                                            const std::string& key_pem,
                                            const std::string& ca_pem);

 private:
  class Service;
  Hub& hub_;
  RealClock real_clock_;
  const ServerOptions options_;
  Logger& log_;
  std::unique_ptr<Service> service_;
  // Where the PEM text is kept for the file watcher (ours, removed at Shutdown); "" when
  // the options named files.
  std::string own_dir_;
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> certificates_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace kmodd::server

#pragma once

// Kubernetes mode's security wiring for `run --kubernetes`: the serving certificates
// (self-managed in Secret kmodd-controller-tls, or brought with --cert/--key/--ca), the CA
// published for agents and the API server, the admission webhook, and the agents' token
// check. Rotation: a daily check re-issues the serving certificate 30 days before it ends;
// the webhook serves the new one on its next connection, the Sync server (RenewInto) on the
// connections it accepts from a minute later; streams already open keep the old one, which
// stays valid for those 30 days.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/log.h"
#include "controller/certs/manager.h"
#include "controller/kube/client.h"
#include "common/clock.h"
#include "controller/server/sync_server.h"
#include "controller/kube_mode/token_review.h"
#include "controller/webhook/webhook_server.h"

namespace kmodd::cli {

struct KubeSecurityConfig {
  std::string ns;
  std::string webhook_listen;  // "" = no webhook server
  std::vector<std::string> cert_dns;
  std::vector<std::string> cert_ips;
  bool self_managed = true;  // false: --cert/--key/--ca already in the Sync options
};

class KubeSecurity {
 public:
  KubeSecurity(kube::KubeClient& client, KubeSecurityConfig config, const Clock& clock,
               Logger& log);
  ~KubeSecurity();
  KubeSecurity(const KubeSecurity&) = delete;
  KubeSecurity& operator=(const KubeSecurity&) = delete;

  // Fills `sync`'s certificate, key, CA and authenticator, publishes the CA, starts the
  // webhook and the daily rotation check. FailedPrecondition for an insecure `sync`.
  [[nodiscard]] absl::Status Start(server::ServerOptions& sync);
  // The Sync server started with those options: renewed certificates go to it too.
  void RenewInto(server::SyncServer* sync);
  void Stop();

  static constexpr absl::Duration kCheckEvery = absl::Hours(24);

 private:
  void RotateLoop();

  kube::KubeClient& client_;
  const KubeSecurityConfig config_;
  const Clock& clock_;
  Logger& log_;
  certs::CertManager certs_;
  server::TokenReviewAuthenticator authenticator_;
  std::unique_ptr<webhook::WebhookServer> webhook_;
  certs::Bundle bundle_;
  server::SyncServer* sync_ = nullptr;  // guarded by mu_

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread rotator_;
};

}  // namespace kmodd::cli

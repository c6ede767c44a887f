#include "controller/cli/kube_security.h"

#include <chrono>

namespace kmodd::cli {

KubeSecurity::KubeSecurity(kube::KubeClient& client, KubeSecurityConfig config,
                           const Clock& clock, Logger& log)
    : client_(client), config_(std::move(config)), clock_(clock), log_(log),
      certs_(client_, {config_.ns, config_.cert_dns, config_.cert_ips}, clock_, log_),
      authenticator_(client_, config_.ns, clock_) {}

KubeSecurity::~KubeSecurity() { Stop(); }

absl::Status KubeSecurity::Start(server::ServerOptions& sync) {
  if (sync.insecure) {
    // The command line refuses it too (run_cmd.cc): pull secrets never go out in clear.
    return absl::FailedPreconditionError(
        "the Kubernetes mode serves agents over TLS only: over plain text any client could "
        "claim any node and be handed its pull secrets");
  }
  if (config_.self_managed) {
    absl::StatusOr<certs::Bundle> b = certs_.Ensure();
    if (!b.ok()) {
      return b.status();
    }
    bundle_ = *std::move(b);
  } else {
    bundle_ = {sync.ca_pem, sync.cert_pem, sync.key_pem};
  }
  // Every replica publishes: the values are the same, and a write that changes nothing is
  // skipped, so an `apply` that reset the caBundle is repaired by the next start.
  if (absl::Status st = certs_.Publish(bundle_.ca_pem); !st.ok()) {
    return st;
  }
  sync.cert_pem = bundle_.cert_pem;
  sync.key_pem = bundle_.key_pem;
  sync.ca_pem = bundle_.ca_pem;
  sync.authenticator = &authenticator_;
  if (!config_.webhook_listen.empty()) {
    http::ServerOptions o;
    o.listen = config_.webhook_listen;
    absl::StatusOr<std::unique_ptr<webhook::WebhookServer>> w =
        webhook::WebhookServer::Start(o, bundle_.cert_pem, bundle_.key_pem, log_);
    if (!w.ok()) {
      return w.status();
    }
    webhook_ = *std::move(w);
  }
  if (config_.self_managed) {
    rotator_ = std::thread([this] { RotateLoop(); });
  }
  return absl::OkStatus();
}

void KubeSecurity::RenewInto(server::SyncServer* sync) {
  std::lock_guard lock(mu_);
  sync_ = sync;
}

void KubeSecurity::RotateLoop() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (cv_.wait_for(lock, absl::ToChronoSeconds(kCheckEvery), [this] { return stop_; })) {
      return;
    }
    server::SyncServer* const sync = sync_;
    lock.unlock();
    absl::StatusOr<certs::Bundle> b = certs_.Ensure();
    if (!b.ok()) {
      log_.Error("certificate check failed; retrying tomorrow, well before expiry",
                 {{"error", b.status().ToString()}});
    } else if (!(*b == bundle_)) {
      bundle_ = *std::move(b);
      if (absl::Status st = certs_.Publish(bundle_.ca_pem); !st.ok()) {
        log_.Error("cannot publish the CA", {{"error", st.ToString()}});
      }
      if (webhook_) {
        if (absl::Status st = webhook_->SetCertificate(bundle_.cert_pem, bundle_.key_pem);
            !st.ok()) {
          log_.Error("webhook keeps its old certificate", {{"error", st.ToString()}});
        }
      }
      if (sync != nullptr) {
        if (absl::Status st = sync->SetCertificate(bundle_.cert_pem, bundle_.key_pem,
                                                   bundle_.ca_pem);
            !st.ok()) {
          log_.Error("Sync server keeps its old certificate", {{"error", st.ToString()}});
        }
      }
      log_.Info("serving certificate renewed: the webhook uses it now, the Sync server for "
                "the connections it accepts from a minute on");
    }
    lock.lock();
  }
}

void KubeSecurity::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (rotator_.joinable()) {
    rotator_.join();
  }
  if (webhook_) {
    webhook_->Stop();
  }
}

}  // namespace kmodd::cli

#pragma once

// Self-managed certificates, so that kmodd needs no cert-manager (docs/deployment.md,
// "Certificates without cert-manager"): the CA and serving key pair live in the Secret
// kmodd-controller-tls, shared by every replica; the CA is published in the ConfigMap
// kmodd-ca (for the agents) and in the caBundle of the ValidatingWebhookConfiguration
// kmodd-module-validation (for the API server).

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/log.h"
#include "controller/certs/pki.h"
#include "controller/kube/client.h"
#include "common/clock.h"

namespace kmodd::certs {

inline constexpr char kSecretName[] = "kmodd-controller-tls";
inline constexpr char kCaConfigMapName[] = "kmodd-ca";
inline constexpr char kWebhookConfigName[] = "kmodd-module-validation";

inline constexpr absl::Duration kCaValidity = absl::Hours(24 * 3650);
inline constexpr absl::Duration kServingValidity = absl::Hours(24 * 365);
// Re-issue this long before expiry; the daily check leaves 29 days to notice a failure.
inline constexpr absl::Duration kRenewBefore = absl::Hours(24 * 30);
// CA rotation in two steps, so that no client ever meets a certificate from a CA it has not
// been given yet: this long before the CA expires a successor is made and published beside
// it (trusted, not signing); once it has been published for kCaOverlap (or when the CA
// enters its last kRenewBefore), it signs the serving certificate, and the old CA stays
// trusted until it expires (replicas that have not re-read the Secret still serve with it).
inline constexpr absl::Duration kCaRolloverBefore = absl::Hours(24 * 90);
inline constexpr absl::Duration kCaOverlap = absl::Hours(24 * 7);

struct Bundle {
  // Every CA to trust (PEM, concatenated): the signing CA, its announced successor, the
  // previous one until it expires. Published for agents and the API server.
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  bool operator==(const Bundle&) const = default;
};

// What the Secret holds: the serving pair plus the CA's key, to sign the next one; during a
// CA rotation, the successor (with its key) or the predecessor (certificate only).
struct Stored {
  KeyPair ca;
  KeyPair serving;
  std::optional<KeyPair> next_ca;
  std::string previous_ca_pem;
};

// The trust bundle of `s` at `now`: ca, next_ca, and previous_ca until it expires.
std::string TrustBundle(const Stored& s, absl::Time now);

enum class Action {
  kKeep,            // valid for more than kRenewBefore and names every wanted SAN
  kReissueServing,  // same CA, new serving certificate
  kNewCa,           // nothing usable: a new CA and serving certificate
  kPrepareNextCa,   // the CA nears its end: make its successor, publish both
  kPromoteNextCa,   // the successor has been published long enough: it signs from now on
};

// Pure: what to do with what the Secret holds (nullopt: no Secret).
Action Decide(const std::optional<Stored>& stored, const ServingNames& want, absl::Time now);

// The serving names of namespace `ns`: the two Services' in-cluster DNS names, plus extras.
ServingNames WantedNames(const std::string& ns, const std::vector<std::string>& extra_dns,
                         const std::vector<std::string>& extra_ips);

struct CertOptions {
  std::string ns;
  std::vector<std::string> extra_dns;
  std::vector<std::string> extra_ips;
};

class CertManager {
 public:
  CertManager(kube::KubeClient& client, CertOptions options, const Clock& clock,
              Logger& log);

  // Reads the Secret; creates or renews what it holds as Decide says (on a lost race,
  // another replica's wins and is read back); returns what to serve with.
  [[nodiscard]] absl::StatusOr<Bundle> Ensure();

  // Writes `ca_pem` into ConfigMap kmodd-ca and into the caBundle of every webhook of
  // kmodd-module-validation, when they differ. A missing webhook configuration is not an
  // error (it is applied with the manifests, maybe later): NotFound is logged and skipped.
  [[nodiscard]] absl::Status Publish(const std::string& ca_pem);

 private:
  absl::StatusOr<std::optional<Stored>> Read(std::string* resource_version);
  absl::Status PublishConfigMap(const std::string& ca_pem);
  absl::Status PublishWebhook(const std::string& ca_pem);

  kube::KubeClient& client_;
  const CertOptions options_;
  const ServingNames names_;
  const Clock& clock_;
  Logger& log_;
};

}  // namespace kmodd::certs

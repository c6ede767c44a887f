#pragma once

// The real Authenticator: a TokenReview (authentication.k8s.io/v1, audience "kmodd") says
// whose the token is; it must be the agent's service account, system:serviceaccount:NS:
// kmodd-agent, and bound to a pod on the node the agent claims: the review's
// user.extra["authentication.kubernetes.io/node-name"] (set for pod-bound tokens since
// Kubernetes 1.32; checked against 1.34 by tests/controller/webhook_test.sh).

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/value.h"
#include "controller/kube/client.h"
#include "common/clock.h"
#include "controller/server/authenticator.h"

namespace kmodd::server {

inline constexpr char kTokenAudience[] = "kmodd";
inline constexpr char kNodeNameExtra[] = "authentication.kubernetes.io/node-name";

struct ReviewedToken {
  bool authenticated = false;
  std::string username;
  std::string node_name;  // empty when the token is not bound to a pod on a node
  std::vector<std::string> audiences;  // status.audiences: those the token is valid for
  std::string error;      // status.error of a refused review
};

// Pure: the status of a TokenReview response. InvalidArgument when it is not one.
[[nodiscard]] absl::StatusOr<ReviewedToken> ParseTokenReview(const Value& review);

// Pure: the binding rule (see Authenticator::Authenticate for the codes).
[[nodiscard]] absl::Status CheckAgentToken(const ReviewedToken& t, const std::string& username,
                                           const std::string& node);

// The expiry ("exp") of a JWT, read without verifying it (the review verified it);
// InfiniteFuture when there is none.
absl::Time JwtExpiry(const std::string& token);

class TokenReviewAuthenticator final : public Authenticator {
 public:
  // `ns` is the namespace of the agent's service account kmodd-agent.
  TokenReviewAuthenticator(kube::KubeClient& client, const std::string& ns,
                           const Clock& clock);

  absl::StatusOr<absl::Time> Authenticate(const std::string& token,
                                          const std::string& node) override;

  // A positive review is reused this long (or until the token expires, if sooner), keyed
  // by the token's SHA-256: reconnect storms cost no API calls. A negative one is reused
  // for kNegativeFor, so that a client repeating a bad token costs one review per period;
  // short, because a token the API server does not know yet (just issued, another API
  // server behind a load balancer) becomes valid soon.
  static constexpr absl::Duration kCacheFor = absl::Minutes(5);
  static constexpr absl::Duration kNegativeFor = absl::Seconds(10);
  static constexpr size_t kMaxCached = 20000;

 private:
  struct Cached {
    ReviewedToken token;
    absl::Time until;
  };
  absl::StatusOr<ReviewedToken> Review(const std::string& token);

  kube::KubeClient& client_;
  const std::string username_;
  const Clock& clock_;
  std::mutex mu_;
  std::map<std::string, Cached> cache_;  // guarded by mu_
};

}  // namespace kmodd::server

#pragma once

// How the Sync server checks an agent that shows a bearer token instead of a client
// certificate (Kubernetes mode: a projected service-account token, audience "kmodd").
// The real implementation asks the API server (token_review.h); tests use a fake.

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kmodd::server {

class Authenticator {
 public:
  virtual ~Authenticator() = default;
  // When `token` is an agent's and is bound to node `node`: the time until which it holds
  // (its expiry; InfiniteFuture when it has none), after which the stream must end.
  // Unauthenticated: not a valid token; PermissionDenied: valid, but not an agent's, not
  // for the audience "kmodd" or bound to another node; Unavailable: it could not be checked
  // now (the agent retries).
  [[nodiscard]] virtual absl::StatusOr<absl::Time> Authenticate(const std::string& token,
                                                                const std::string& node) = 0;
};

}  // namespace kmodd::server

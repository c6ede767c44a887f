#pragma once

// Where the API server is and how to authenticate to it: from a kubeconfig file, or from
// the pod's service account when running in the cluster.

#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace kmodd::kube {

inline constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

struct KubeConfig {
  std::string server;  // https://host:port (http:// only in tests)
  std::string ca_pem;  // trusted CAs; empty: the system's
  bool insecure_skip_tls_verify = false;
  std::string token;       // a bearer token given inline
  std::string token_file;  // a bearer token read from this file, re-read as it rotates
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string ns;  // the context's namespace, or the pod's; "default" when unset
};

// Reads `path` and picks `context` (empty: current-context). Relative file paths in it are
// relative to the file's directory, as kubectl reads them. InvalidArgument naming the
// field for anything malformed or missing; Unimplemented for auth kmodd does not do (exec
// plugins, auth providers, basic auth).
[[nodiscard]] absl::StatusOr<KubeConfig> LoadKubeconfig(const std::string& path,
                                                        std::string_view context = "");

// The pod's service account: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT from the
// environment; token, ca.crt and namespace under `dir`. FailedPrecondition when not in a
// cluster.
[[nodiscard]] absl::StatusOr<KubeConfig> InClusterConfig(const std::string& dir =
                                                             kServiceAccountDir);

// The bearer token for each request. A token file (a projected service-account token,
// which the kubelet rotates) is checked for a new modification time at most once a
// minute, as client-go does, and at once after Invalidate() (a 401). Thread-safe.
class TokenSource {
 public:
  TokenSource(std::string token, std::string file, const Clock& clock)
      : token_(std::move(token)), file_(std::move(file)), clock_(clock) {}

  // Empty when there is no token. An unreadable file is an error only until a token has
  // been read once: then the last good token is kept.
  [[nodiscard]] absl::StatusOr<std::string> Token();
  void Invalidate();

  static constexpr absl::Duration kRecheck = absl::Minutes(1);

 private:
  std::mutex mu_;
  std::string token_;
  const std::string file_;
  const Clock& clock_;
  bool read_ = false;
  absl::Time checked_ = absl::InfinitePast();
  int64_t mtime_ns_ = -1;
};

}  // namespace kmodd::kube

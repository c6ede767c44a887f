#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/http/client.h"
#include "controller/kube/client.h"
#include "common/clock.h"
#include "controller/kube/config.h"

namespace kmodd::kube {

// KubeClient on common/http: JSON in and out, a bearer token (re-read as it rotates) or a
// client certificate. Create()'s client keeps connections to the server alive between calls
// (a watch has its own).
class RestKubeClient final : public KubeClient {
 public:
  // With a BeastHttpClient that trusts config.ca_pem (or the system's CAs when empty) and
  // presents config's client certificate. InvalidArgument for unusable TLS material.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RestKubeClient>> Create(
      const KubeConfig& config, const Clock& clock);
  // Over any HttpClient (TLS is its business).
  RestKubeClient(const KubeConfig& config, std::unique_ptr<http::HttpClient> http,
                 const Clock& clock);

  absl::StatusOr<Value> Get(std::string_view path) override;
  absl::StatusOr<ObjectList> List(std::string_view path, const ListOptions& options) override;
  absl::Status Watch(std::string_view path, const WatchOptions& options,
                     const WatchHandler& handler) override;
  absl::StatusOr<Value> Create(std::string_view collection, const Value& object) override;
  absl::StatusOr<Value> Update(std::string_view path, const Value& object) override;
  absl::StatusOr<Value> MergePatch(std::string_view path, const Value& patch) override;
  absl::StatusOr<Value> Apply(std::string_view path, const Value& object,
                              const ApplyOptions& options) override;
  absl::Status Delete(std::string_view path) override;

  // Bound for every call but Watch (whose bound is its timeout plus this).
  static constexpr http::Duration kRequestTimeout = std::chrono::seconds(30);

 private:
  absl::StatusOr<http::Request> NewRequest(std::string_view method, std::string_view target);
  // Sends, maps a non-2xx answer to an error, parses a 2xx body.
  absl::StatusOr<Value> Call(std::string_view method, std::string_view target,
                             std::string_view content_type, std::string body);

  std::string server_;  // scheme://host:port, no trailing slash
  std::unique_ptr<http::HttpClient> http_;
  TokenSource token_;
};

// application/x-www-form-urlencoded-safe percent-encoding of one query value.
std::string QueryEscape(std::string_view s);

}  // namespace kmodd::kube

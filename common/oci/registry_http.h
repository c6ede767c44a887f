#pragma once

// The HTTP client a registry's TLS options call for: its CA file and whether to skip
// verification (KMM's registryTLS), on top of the system's CAs. Shared by the agent's image
// cache and the controller's preflight and signing.

#include <memory>

#include "absl/status/statusor.h"
#include "common/http/beast_client.h"
#include "common/oci/registry_client.h"

namespace kmodd::image {

inline absl::StatusOr<std::unique_ptr<http::HttpClient>> NewRegistryHttpClient(const RegistryOptions& o) {
  http::ClientOptions opts;
  opts.tls.ca_file = o.ca_file;
  opts.tls.insecure_skip_verify = o.skip_tls_verify;
  auto c = http::BeastHttpClient::Create(opts);
  if (!c.ok()) {
    return c.status();
  }
  return std::unique_ptr<http::HttpClient>(std::move(*c));
}

}  // namespace kmodd::image

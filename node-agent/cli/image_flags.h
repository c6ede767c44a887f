#pragma once

// The image-cache settings that `pull` and `apply` share, and the HTTP client factory that
// turns a registry's TLS options into a client.

#include <memory>
#include <string>

#include "common/http/beast_client.h"
#include "node-agent/image/cache.h"

namespace kmodd::agent {

inline image::ImageCache::HttpFactory BeastFactory() {
  return [](const image::RegistryOptions& o)
             -> absl::StatusOr<std::unique_ptr<http::HttpClient>> {
    http::ClientOptions opts;
    opts.tls.ca_file = o.ca_file;
    opts.tls.insecure_skip_verify = o.skip_tls_verify;
    auto c = http::BeastHttpClient::Create(opts);
    if (!c.ok()) {
      return c.status();
    }
    return std::unique_ptr<http::HttpClient>(std::move(*c));
  };
}

}  // namespace kmodd::agent

#pragma once

// The image-cache settings that `pull` and `apply` share, and the HTTP client factory that
// turns a registry's TLS options into a client.

#include <memory>
#include <string>

#include "common/oci/registry_http.h"
#include "node-agent/image/cache.h"

namespace kmodd::agent {

inline image::ImageCache::HttpFactory BeastFactory() { return image::NewRegistryHttpClient; }

}  // namespace kmodd::agent

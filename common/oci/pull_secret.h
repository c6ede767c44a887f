#pragma once

// Registry credentials from a Kubernetes pull secret's `.dockerconfigjson`
// ({"auths": {"<registry>": {"auth": base64(user:pass)} | {"username", "password"}}}).

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace kmodd::image {

struct Credentials {
  std::string username;
  std::string password;
  bool operator==(const Credentials&) const = default;
};

// The credentials for `registry` (host[:port]); keys may be written with a scheme or a
// path ("https://index.docker.io/v1/"), as docker login writes them. nullopt when none.
[[nodiscard]] absl::StatusOr<std::optional<Credentials>> CredentialsFor(
    const std::string& dockerconfigjson, const std::string& registry);

}  // namespace kmodd::image

#pragma once

// What the controller accepts as a Module's pull Secret (spec.imageRepoSecret) before it
// hands it to any node: a Secret of type kubernetes.io/dockerconfigjson whose
// .dockerconfigjson is base64 of one JSON object {"auths": {"<registry>": {...}}} with string
// auth (base64 of user:password), username and password fields. The agent reads the same
// shape with the same strict parser (common/oci/pull_secret.cc) and refuses the whole
// file for one bad entry, as Go's encoding/json does for the kubelet and containerd: a
// Secret refused here would only fail every pull on every node, so it is reported on the
// Module and never sent.

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/json.h"
#include "common/value.h"

namespace kmodd::source {

inline constexpr char kDockerConfigJsonType[] = "kubernetes.io/dockerconfigjson";

// A .dockerconfigjson of a few registries takes a few KiB (a cloud identity token is about
// 3 KiB); every node running the Module is sent it in each desired state.
inline constexpr size_t kMaxDockerConfigBytes = 256 << 10;
// The agent's bounds for registry and pull-secret JSON (common/oci/json_fields.h).
inline constexpr JsonLimits kDockerConfigLimits{32, 10000, 200000};

// The decoded .dockerconfigjson of `secret` (a Secret object as the API returns it).
// FailedPrecondition when the Secret is not a kubernetes.io/dockerconfigjson one (its type,
// or no .dockerconfigjson key); InvalidArgument when the content is not what a node can use
// (not base64, too large, not JSON, or not the shape above). Messages begin "Secret
// <namespace>/<name>" and name the field.
[[nodiscard]] absl::StatusOr<std::string> DockerConfigFromSecret(const Value& secret);

// One value of a Secret (an object as the API returns it), base64-decoded: KMM's signing
// Secrets hold the key under data.key and the certificate under data.cert. Errors begin
// "Secret <namespace>/<name>" and name the field: no such key, not a string, not base64, or
// more than max_bytes decoded (checked before decoding).
[[nodiscard]] absl::StatusOr<std::string> SecretValue(const Value& secret, const std::string& key,
                                                      size_t max_bytes);

// Pure: the shape check of a decoded .dockerconfigjson; InvalidArgument naming the field
// relative to the content ("auths[\"reg\"].auth: expected a string, got a number").
[[nodiscard]] absl::Status CheckDockerConfig(std::string_view json);

}  // namespace kmodd::source

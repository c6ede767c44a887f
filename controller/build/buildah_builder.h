#pragma once

// KMM's in-cluster build, with buildah instead of kaniko (archived upstream in 2025), run by
// the controller itself in standalone mode: the Module's Dockerfile (build.dockerfileConfigMap)
// built with KMM's variables and the Module's buildArgs as build arguments, pushed as the
// mapping's containerImage. buildah runs without a daemon (vfs storage, chroot isolation)
// in a private work directory that is removed afterwards; the registry credentials go in a
// 0600 file there for the length of the build.
//
// The image carries the label kmodd.io/build-hash: the hash of the Dockerfile, the build
// arguments and imageRebuildTriggerGeneration. An image already in the registry with the same
// hash is not built again; any change to those builds it again, and nothing else does.
// A failed build is retried with backoff (KMM never retries); the error carries the tail of
// buildah's log.

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/oci/reference.h"
#include "common/oci/registry_client.h"

namespace kmodd::build {

inline constexpr char kBuildHashLabel[] = "kmodd.io/build-hash";

struct BuildSpec {
  std::string dockerfile;
  std::vector<std::pair<std::string, std::string>> args;  // in order; a later name wins
  bool base_plain_http = false;     // build.baseImageRegistryTLS.insecure
  bool base_skip_verify = false;    // build.baseImageRegistryTLS.insecureSkipTLSVerify
  std::optional<int64_t> rebuild_trigger;  // spec.imageRebuildTriggerGeneration
};

// sha256 of what makes the image: the Dockerfile, the arguments (by name, the last value of
// each), the trigger.
std::string BuildHash(const BuildSpec& spec);

struct BuildRequest {
  BuildSpec spec;
  image::ImageRef target;
  image::RegistryOptions target_options;  // the mapping's registryTLS, credentials, CA
  std::string docker_config;              // .dockerconfigjson for the base images and the push
  std::vector<std::string> volumes;       // SRC:DST[:ro], bind-mounted into every RUN
  std::string work_parent = "/tmp";       // where the private work directory goes
  std::string buildah = "buildah";
  int attempts = 3;
  std::chrono::milliseconds backoff{2000};  // doubles after each failed attempt
};

struct BuildResult {
  std::string digest;     // of the image in the registry
  std::string hash;       // its kmodd.io/build-hash
  bool built = false;     // false: the registry had it with this hash already
  int attempts = 0;
  double seconds = 0;     // wall time of the build and the push
};

[[nodiscard]] absl::StatusOr<BuildResult> Build(const BuildRequest& req);

// The kmodd.io/build-hash label of `ref`'s image; "" when the image has none, NotFound when
// there is no such image.
[[nodiscard]] absl::StatusOr<std::string> ImageBuildHash(const image::ImageRef& ref,
                                                         const image::RegistryOptions& options);

}  // namespace kmodd::build

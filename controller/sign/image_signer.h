#pragma once

// KMM's in-cluster signing, without a Job: the Module's sign.unsignedImage is read from its
// registry, the modules it names (sign.filesToSign, shell globs as KMM's signing job expands
// them, or every .ko under the kernel's directory) are signed with sign::SignModule, and the
// image is pushed as the mapping's containerImage with one more layer holding the signed
// files at the same paths. The unsigned image's layers are mounted from its repository when
// both are on one registry (no byte moves), copied otherwise.
//
// The new image is the unsigned one's manifest for the platform asked (an index is not
// copied), its config with the layer's diff_id and a history entry added; annotations of
// the unsigned manifest are not carried over. Signing is deterministic for RSA keys (the
// layer too, see layer_builder.h): signing the same image twice pushes the same digest.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/oci/reference.h"
#include "common/oci/registry_client.h"
#include "controller/sign/module_signer.h"

namespace kmodd::sign {

struct SignImageRequest {
  image::ImageRef unsigned_image;
  image::RegistryOptions unsigned_options;  // sign.unsignedImageRegistryTLS, its credentials
  image::ImageRef signed_image;
  image::RegistryOptions signed_options;    // the mapping's registryTLS, push credentials
  // Image paths or shell globs (fnmatch, '/' matched only by '/'), with or without a leading
  // '/'. Each must match at least one regular file. Ignored when all_modules is set.
  std::vector<std::string> files_to_sign;
  bool all_modules = false;    // sign every .ko under modules_dir instead
  std::string modules_dir;     // "opt/lib/modules/K/" (for all_modules)
  const SigningKey* key = nullptr;
  uint64_t max_file_bytes = uint64_t{256} << 20;  // per module read into memory
  image::Platform platform;
};

struct SignImageResult {
  std::string manifest_digest;             // of the pushed signed image
  std::vector<std::string> signed_files;   // image paths, with a leading '/'
  int64_t bytes_fetched = 0;               // blob bytes read from the unsigned image
  int64_t bytes_pushed = 0;                // blob bytes sent (base layers mounted send none)
  int base_layers_mounted = 0;             // base layers present or mounted, not copied
};

// Errors name the image and the file or pattern: a pattern that matches nothing, a file
// that is not a kernel module or a symlink, a registry's refusal.
[[nodiscard]] absl::StatusOr<SignImageResult> SignImage(const SignImageRequest& req);

}  // namespace kmodd::sign

#pragma once

// The two other side effects the reconciler has besides the kernel: where a driver tree
// comes from (an image), and firmware staging. Small interfaces, one real implementation
// each (wired in main), fakes in tests.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/node_modules_config.h"
#include "firmware/shadow.h"

namespace kmodd::reconcile {

class ImageStore {
 public:
  virtual ~ImageStore() = default;
  // The root directory of the image's files on this node (pulling it if needed).
  [[nodiscard]] virtual absl::StatusOr<std::string> RootFor(const api::NodeModuleSpec& m) = 0;
  // The manifest digest of the image a root returned by RootFor came from ("" when the
  // root is not from an OCI image, e.g. dir:).
  virtual std::string DigestOf(const std::string& /*root*/) const { return ""; }
};

// `dir:/path/to/rootfs`: a driver tree already on the node (air-gapped nodes, tests).
class DirImageStore : public ImageStore {
 public:
  absl::StatusOr<std::string> RootFor(const api::NodeModuleSpec& m) override;
};

class FirmwareStore {
 public:
  virtual ~FirmwareStore() = default;
  // Makes the files under `source_dir` available to the kernel for `owner`, replacing
  // what `owner` had staged before; returns the staged relative paths.
  [[nodiscard]] virtual absl::StatusOr<std::vector<std::string>> Stage(
      const std::string& owner, const std::string& source_dir) = 0;
  // Drops everything `owner` staged (files shared with other owners stay).
  [[nodiscard]] virtual absl::Status Release(const std::string& owner) = 0;
  // Of `paths` (as Stage returned them), those the kernel now loads instead of a file of
  // the host's own firmware tree, with that file. Reported, never refused. Reads the file
  // system; none when the store cannot tell.
  virtual std::vector<firmware::Shadow> Shadowed(const std::vector<std::string>& /*paths*/) const {
    return {};
  }
};

}  // namespace kmodd::reconcile

#pragma once

// Pure rules about paths inside a layer: normalisation, the keep filter, whiteouts and where
// a symlink may point. No I/O: the agent's layer writer (node-agent/image/layer_writer.cc)
// applies them, and the controller's preflight and signer read layers by them. Splitting and joining paths, and
// resolving them on disk without following symlinks, are not the image's: common/rel_path.h
// and common/beneath.h.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/rel_path.h"

namespace kmodd::image {

// An archive path made relative to the image root: "./a//b/" -> "a/b", "." -> "" (the root).
// InvalidArgument (the message is the rule only) for an absolute path or a ".." component:
// well-formed layers have neither, and rewriting them would only hide a hostile image.
[[nodiscard]] absl::StatusOr<std::string> NormalizeEntryPath(std::string_view raw);

// The lenient reading of an archive path, for code that only looks at a layer (preflight,
// the signer): no leading "./" or "/", no trailing "/" ("" for the root), nothing refused
// ("a/../b" stays as it is). What writes a layer uses NormalizeEntryPath.
std::string CleanArchivePath(std::string_view path);

// `path` is `dir` or beneath it (normalised paths; every path is beneath "").
bool IsBeneath(std::string_view path, std::string_view dir);

// Number of components of a normalised path ("" has 0).
size_t PathDepth(std::string_view path);

// Whether a symlink at normalised path `link_path` with target `target` stays beneath the
// root. Only relative targets of the form (../)*name(/name)* qualify (with "." and empty
// components ignored): every ".." then climbs a real directory (the link's own parents,
// which the writer created without following links), and descending through names can at
// worst reach other symlinks checked by this same rule. A ".." after a name is refused
// because the kernel resolves "x/.." through x, which may itself be a symlink.
// InvalidArgument naming the rule otherwise.
[[nodiscard]] absl::Status CheckSymlinkTarget(std::string_view link_path, std::string_view target);

// Whether normalised `path` is ".../lib/modules/<kernel>/build" or ".../source": the links
// `make modules_install` leaves to the kernel's source tree. An image that copies a whole
// /lib/modules/<kernel> carries them with absolute targets; they are dropped, not refused,
// since nothing the agent does reads them.
bool IsKernelBuildLink(std::string_view path);

// OCI whiteouts: ".wh.<name>" removes <name> from lower layers; ".wh..wh..opq" removes the
// lower layers' content of its directory. Other ".wh..wh." names are AUFS bookkeeping and
// mean nothing (containerd skips them too).
struct Whiteout {
  enum Kind { kNone, kRemove, kOpaque, kIgnore } kind = kNone;
  std::string target;  // the path removed, or the opaque directory
};
[[nodiscard]] absl::StatusOr<Whiteout> ClassifyWhiteout(std::string_view path);

// The subtrees that are written; everything else is parsed and dropped.
class KeepFilter {
 public:
  // Prefixes are normalised like entry paths ("/firmware/" -> "firmware"); "" keeps all.
  [[nodiscard]] static absl::StatusOr<KeepFilter> Make(const std::vector<std::string>& prefixes);

  // `path` is one of the prefixes or beneath one.
  bool Keeps(std::string_view path) const;
  // `path` is a strict ancestor of a prefix ("" for any prefix but ""): its directory holds
  // kept content, so removing or replacing it affects what is written.
  bool Encloses(std::string_view path) const;

 private:
  std::vector<std::string> prefixes_;
};

}  // namespace kmodd::image

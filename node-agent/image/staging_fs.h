#pragma once

// File system operations beneath a staging root, for content that comes from an untrusted
// image. Paths are walked one component at a time with openat(O_NOFOLLOW): a symlink placed
// by an earlier entry (or layer) is never followed by a later write, create or removal.
// Removal and pruning read a directory's names before changing it, and never cross symlinks.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/fd.h"

namespace kmodd::image {

// Opens a directory by path, following symlinks: for roots chosen by kmodd, not by images.
[[nodiscard]] absl::StatusOr<Fd> OpenDirPath(const std::string& path);

// Opens directory `rel` (normalised; "" is the root) beneath `root`, creating missing
// directories with mode 0755. A component that is a symlink or not a directory is an
// InvalidArgument error: image content never redirects a write.
[[nodiscard]] absl::StatusOr<Fd> MakeDirsBeneath(const Fd& root, std::string_view rel);

// Like MakeDirsBeneath without creating anything: nullopt when a component is absent or is
// not a real directory (a symlink included), i.e. when nothing lies beneath it to act on.
[[nodiscard]] absl::StatusOr<std::optional<Fd>> OpenDirIfPresent(const Fd& root,
                                                                 std::string_view rel);

// What `name` in `dir` is, without following a symlink.
enum class NodeKind { kAbsent, kDirectory, kRegular, kOther };
[[nodiscard]] absl::StatusOr<NodeKind> KindOf(const Fd& dir, const std::string& name,
                                              const std::string& display);

// Removes `name` from `dir`, with everything beneath it if a directory. Absent is fine.
[[nodiscard]] absl::Status RemoveBeneath(const Fd& dir, const std::string& name,
                                         const std::string& display);

// Removes every entry beneath directory `dir` (whose path is `rel`) for which `keep(path)`
// is false, descending into the kept directories.
[[nodiscard]] absl::Status PruneDir(const Fd& dir, const std::string& rel,
                                    absl::FunctionRef<bool(const std::string&)> keep);

[[nodiscard]] absl::Status WriteAll(const Fd& fd, const char* data, size_t n,
                                    const std::string& display);

}  // namespace kmodd::image

#pragma once

// Filesystem access confined beneath a directory. Every path below a root is walked one
// component at a time with openat(O_NOFOLLOW), so a symlink planted anywhere below the root
// (by a hostile image or by mistake) is refused instead of followed, and there is no window
// between checking a path and using it. Roots themselves are opened normally: they come from
// kmodd's configuration or its own image store, not from image content.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/fd.h"
#include "firmware/identity.h"

namespace kmodd::firmware {

// Accepts only a path strictly beneath a directory: relative, no empty, "." or ".."
// components, printable ASCII (the names drivers request are; it also keeps the ledger's JSON
// exact), and not one of the temporary names below. InvalidArgument otherwise.
[[nodiscard]] absl::Status CheckRelativePath(std::string_view rel);

// "a/b/c" -> {"a/b", "c"}; "c" -> {"", "c"}.
std::pair<std::string, std::string> SplitParent(std::string_view rel);
// "a/b" -> {"a", "a/b"}: every directory prefix, outermost first.
std::vector<std::string> DirPrefixes(std::string_view rel_dir);
std::string JoinPath(std::string_view root, std::string_view rel);

// Names reserved next to each staged file: the new content before it is renamed into place,
// and the old content kept until the change is committed.
std::string NewName(std::string_view base);
std::string OldName(std::string_view base);

// Opens a root directory, following symlinks (see above).
[[nodiscard]] absl::StatusOr<Fd> OpenRoot(const std::string& path);

struct DirProbe {
  std::optional<Fd> dir;             // set when every component exists
  std::vector<std::string> missing;  // otherwise the prefixes that do not exist yet
};
// Walks `rel_dir` ("" is the root itself) without creating anything.
[[nodiscard]] absl::StatusOr<DirProbe> ProbeDir(const Fd& root, const std::string& root_path,
                                                std::string_view rel_dir);
// Walks `rel_dir`, creating missing directories with mode 0755.
[[nodiscard]] absl::StatusOr<Fd> MakeDirs(const Fd& root, const std::string& root_path,
                                          std::string_view rel_dir);

// Opens `name` in `dir` read-only without following a symlink. nullopt when absent; an error
// naming `display` when it is anything but a regular file.
[[nodiscard]] absl::StatusOr<std::optional<Fd>> OpenRegular(const Fd& dir, std::string_view name,
                                                            const std::string& display);
// Both at once: nullopt when the file or any directory above it is absent.
[[nodiscard]] absl::StatusOr<std::optional<Fd>> OpenRegularBeneath(const Fd& root,
                                                                   const std::string& root_path,
                                                                   std::string_view rel);

[[nodiscard]] absl::StatusOr<Identity> ReadIdentity(const Fd& file, const std::string& display);
[[nodiscard]] absl::StatusOr<bool> SameBytes(const Fd& a, const Fd& b, const std::string& display);
// Writes the content of `src` to `name` in `dir` (replacing a leftover of that name, never
// through a symlink), mode 0644, flushed to disk. Returns the identity of what was written.
[[nodiscard]] absl::StatusOr<Identity> CopyInto(const Fd& src, const Fd& dir, std::string_view name,
                                                const std::string& display);
// Flushes a directory's entries (renames, unlinks) to disk.
[[nodiscard]] absl::Status SyncDir(const Fd& dir, const std::string& display);

}  // namespace kmodd::firmware

#pragma once

// File system access confined beneath a directory: the one implementation behind the agent's
// two writers of content it does not trust, firmware staging (firmware/) and image extraction
// (node-agent/image/). A path beneath a root never follows a symlink and never leaves the
// root, whoever planted the symlink (an image, a layer, another process) and whenever:
//
//  - Where the kernel has openat2(2) (Linux 5.6; probed once per process), a directory is
//    opened in one call with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS:
//    the kernel refuses every symlink and every escape along the whole path, atomically.
//  - Otherwise, and whenever openat2 does not open the whole path (a component is absent,
//    a symlink or not a directory, or the path is longer than PATH_MAX), the path is walked
//    one component at a time with openat(O_NOFOLLOW), each from the descriptor of the one
//    before. The walk is what says which component stopped it, and what creates directories.
//
// Once a directory is open it is held by its descriptor, so a component replaced by a symlink
// afterwards redirects nothing, and the last component of a path is acted on relative to its
// parent's descriptor with O_NOFOLLOW / AT_SYMLINK_NOFOLLOW. There is no window between
// checking a path and using it.
//
// Paths beneath a root are names only: "", "a/b", "a//b/". An absolute path, a "." or ".."
// component or a NUL byte is InvalidArgument: the callers validate their paths by their own
// rules first (firmware/files.h, common/oci/layer_path.h); this is the second line.
// Roots are opened normally (OpenRoot): they come from kmodd's configuration or its own
// store, not from content.
//
// What a walk finds is reported as a fact (DirWalk) for callers that word it their own way;
// ProbeDir, MakeDirs and OpenRegular word it as FailedPrecondition
// ("<path>: is a symbolic link; refusing to follow it"). Blocking I/O: never on an event loop.

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/fd.h"
#include "common/rel_path.h"

namespace kmodd {

// Opens a root directory by path, following symlinks (see above).
[[nodiscard]] absl::StatusOr<Fd> OpenRoot(const std::string& path);

// Where a walk beneath a root ended.
struct DirWalk {
  enum End { kOpened, kAbsent, kSymlink, kNotDirectory };
  End end = kOpened;
  Fd dir;            // kOpened: the directory
  size_t depth = 0;  // the components opened as real directories before the end
  std::string at;    // otherwise: the prefix of the path that is absent, a symlink or not a
                     // directory ("a/b")
};

// Opens directory `rel` ("" is the root itself) beneath `root` without creating anything.
// `root_path` prefixes the paths in error messages ("" shows them relative).
[[nodiscard]] absl::StatusOr<DirWalk> WalkDir(const Fd& root, const std::string& root_path,
                                              std::string_view rel);
// The same, creating missing directories with exactly `mode` (not masked by the umask).
// Never kAbsent, unless a directory vanished right after being created.
[[nodiscard]] absl::StatusOr<DirWalk> WalkDirCreating(const Fd& root, const std::string& root_path,
                                                      std::string_view rel, mode_t mode);

struct DirProbe {
  std::optional<Fd> dir;             // set when every component exists
  std::vector<std::string> missing;  // otherwise the prefixes that do not exist yet
};
// WalkDir with a component that is a symlink or not a directory as FailedPrecondition.
[[nodiscard]] absl::StatusOr<DirProbe> ProbeDir(const Fd& root, const std::string& root_path,
                                                std::string_view rel_dir);
// WalkDirCreating (mode 0755) with the same errors.
[[nodiscard]] absl::StatusOr<Fd> MakeDirs(const Fd& root, const std::string& root_path,
                                          std::string_view rel_dir);

// Opens `name` in `dir` read-only without following a symlink, and without opening it at all
// unless it is a regular file (opening a device or a FIFO can have side effects or block).
// nullopt when absent; FailedPrecondition naming `display` when it is anything else.
[[nodiscard]] absl::StatusOr<std::optional<Fd>> OpenRegular(const Fd& dir, std::string_view name,
                                                            const std::string& display);
// ProbeDir of the parent, then OpenRegular: nullopt when the file or a directory above it is
// absent.
[[nodiscard]] absl::StatusOr<std::optional<Fd>> OpenRegularBeneath(const Fd& root,
                                                                   const std::string& root_path,
                                                                   std::string_view rel);

// What `name` in `dir` is, without following a symlink.
enum class NodeKind { kAbsent, kDirectory, kRegular, kOther };
[[nodiscard]] absl::StatusOr<NodeKind> KindOf(const Fd& dir, const std::string& name,
                                              const std::string& display);

// Removes `name` from `dir`, with everything beneath it if a directory; a symlink is removed,
// never what it points to. Absent is fine.
[[nodiscard]] absl::Status RemoveBeneath(const Fd& dir, const std::string& name,
                                         const std::string& display);

// Removes every entry beneath directory `dir` (whose path is `rel`) for which `keep(path)` is
// false, descending into the kept directories (never through a symlink). A directory's names
// are read before any of them is changed.
[[nodiscard]] absl::Status PruneDir(const Fd& dir, const std::string& rel,
                                    absl::FunctionRef<bool(const std::string&)> keep);

// Writes all of `data`, retrying short writes and EINTR.
[[nodiscard]] absl::Status WriteAll(const Fd& fd, const char* data, size_t n,
                                    const std::string& display);

// Flushes a directory's entries (renames, unlinks) to disk.
[[nodiscard]] absl::Status SyncDir(const Fd& dir, const std::string& display);

// How directories beneath a root are resolved (see the top of this file).
enum class Resolver { kOpenat2, kWalk };
// kOpenat2 when the kernel has openat2 (the first call probes it), else kWalk.
Resolver ActiveResolver();

// For tests only: while it lives, the whole process resolves with `resolver` (kOpenat2 still
// needs the kernel: check ActiveResolver()). Restores the previous choice when destroyed.
class ScopedResolverForTesting {
 public:
  explicit ScopedResolverForTesting(Resolver resolver);
  ~ScopedResolverForTesting();
  ScopedResolverForTesting(const ScopedResolverForTesting&) = delete;
  ScopedResolverForTesting& operator=(const ScopedResolverForTesting&) = delete;

 private:
  int previous_;
};

namespace internal {
// openat2(root, rel, O_RDONLY | O_DIRECTORY, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
// RESOLVE_NO_MAGICLINKS) as such: the descriptor, or -errno. No check of `rel` of its own;
// the tests use it to show what the kernel refuses by itself.
int Openat2Dir(int root, const std::string& rel);
// InvalidArgument naming `display` unless `name` is one name: not empty, ".", ".." nor with a
// "/" or a NUL (what a function taking a directory and a name acts on, never a path).
[[nodiscard]] absl::Status CheckName(std::string_view name, const std::string& display);
}  // namespace internal

}  // namespace kmodd

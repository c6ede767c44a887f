#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kmodd {

// Reads a whole file. The error names the path and the OS reason.
[[nodiscard]] absl::StatusOr<std::string> ReadFile(const std::string& path);

// Replaces `path` with `content` atomically: written to a temporary file in the same
// directory, flushed to disk, renamed over `path`, and the directory flushed, so that a
// crash leaves either the old content or the new, never a mix. `mode` is the new file's.
[[nodiscard]] absl::Status WriteFileAtomic(const std::string& path, std::string_view content,
                                           int mode = 0644);

// An errno as a Status naming the operation and the path, with a code chosen by what the
// caller should do (NotFound, PermissionDenied, ResourceExhausted, ... or Unknown).
absl::Status ErrnoStatus(int err, std::string_view op, std::string_view path);

}  // namespace kmodd

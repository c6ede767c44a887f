#pragma once

// The firmware side of staging files: which relative names an image or a ledger may use, the
// temporary names beside each staged file, and reading, comparing and copying content by
// identity. Every path is resolved beneath its root by common/beneath.h (never through a
// symlink); these add only what is firmware's.

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/beneath.h"
#include "common/fd.h"
#include "firmware/identity.h"

namespace kmodd::firmware {

// Accepts only a path strictly beneath a directory: relative, no empty, "." or ".."
// components, printable ASCII (the names drivers request are; it also keeps the ledger's JSON
// exact), and not one of the temporary names below. InvalidArgument otherwise.
[[nodiscard]] absl::Status CheckRelativePath(std::string_view rel);

// Names reserved next to each staged file: the new content before it is renamed into place,
// and the old content kept until the change is committed.
std::string NewName(std::string_view base);
std::string OldName(std::string_view base);

[[nodiscard]] absl::StatusOr<Identity> ReadIdentity(const Fd& file, const std::string& display);
[[nodiscard]] absl::StatusOr<bool> SameBytes(const Fd& a, const Fd& b, const std::string& display);
// Writes the content of `src` to `name` in `dir` (replacing a leftover of that name, never
// through a symlink), mode 0644, flushed to disk. Returns the identity of what was written.
[[nodiscard]] absl::StatusOr<Identity> CopyInto(const Fd& src, const Fd& dir, std::string_view name,
                                                const std::string& display);

}  // namespace kmodd::firmware

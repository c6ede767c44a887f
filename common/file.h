#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace kmodd {

// Reads a whole file. The error names the path and the OS reason.
[[nodiscard]] absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace kmodd

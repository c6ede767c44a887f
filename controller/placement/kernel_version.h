#pragma once

// Kernel version handling exactly as KMM does it, and the image template substitution.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace kmodd::placement {

// KMM trims one trailing '+' from the kernel a node reports (kernels built from a dirty
// tree append it) before matching mappings.
std::string_view TrimKernelPlus(std::string_view kernel);

// Characters outside [A-Za-z0-9._-] become '_' (KMM's NormalizeVersion).
std::string NormalizeKernelVersion(std::string_view kernel);

using Vars = std::vector<std::pair<std::string, std::string>>;

// KERNEL_FULL_VERSION, KERNEL_VERSION, KERNEL_XYZ, KERNEL_X, KERNEL_Y, KERNEL_Z from the
// kernel (normalised, then split on '.', ',' or '-'), and MOD_NAME, MOD_NAMESPACE.
// A kernel with fewer than three components is an error, as in KMM.
[[nodiscard]] absl::StatusOr<Vars> TemplateVars(std::string_view kernel,
                                               std::string_view module_name,
                                               std::string_view module_namespace);

// Expands $VAR, ${VAR} and ${VAR:-default}; "$$" is a literal '$'. Unlike KMM (whose
// envsubst silently expands an unknown variable to ""), an unknown variable without a
// default is an error: an image reference with a hole in it is never what was meant.
[[nodiscard]] absl::StatusOr<std::string> Substitute(std::string_view tmpl, const Vars& vars);

}  // namespace kmodd::placement

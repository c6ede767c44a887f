#pragma once

// Reading the kernel's module state from procfs and sysfs. The roots are parameters so
// that tests can point them at fixture trees; the agent uses /proc and /sys.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "node-agent/kernel/kernel.h"

namespace kmodd::kernel {

struct ProcRoots {
  std::string proc = "/proc";
  std::string sys = "/sys";
};

// Parses /proc/modules ("name size refcount holders, state address [(taint)]"). Holders
// and taint come from here too; sysfs adds version, srcversion and parameters.
[[nodiscard]] absl::StatusOr<std::vector<LoadedModule>> ParseProcModules(std::string_view text);

// The whole observed state: release, boot id, taint, and every loaded module (sorted).
[[nodiscard]] absl::StatusOr<KernelState> ReadKernelState(const ProcRoots& roots);

}  // namespace kmodd::kernel

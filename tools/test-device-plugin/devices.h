#pragma once

// The pure part of the test device plugin: which devices it has, their health as a health
// file says, and what Allocate and GetPreferredAllocation answer. No I/O, no gRPC.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kmodd::test_device_plugin {

inline constexpr size_t kMaxHealthFileBytes = 64 * 1024;
inline constexpr absl::string_view kHealthy = "Healthy";
inline constexpr absl::string_view kUnhealthy = "Unhealthy";

// Device id -> healthy, in id order. The ids are <name>-0 .. <name>-<count-1>.
using Health = std::map<std::string, bool>;

std::vector<std::string> DeviceIds(absl::string_view name, int count);

// Every device healthy (no health file), or every device unhealthy (the file is absent).
Health AllDevices(const std::vector<std::string>& ids, bool healthy);

// The health file's content: one rule a line, "<device-id> Healthy|Unhealthy" or
// "* Healthy|Unhealthy" (every device); later lines win; devices no line names are Healthy;
// blank lines and lines starting with '#' are skipped. Anything else (an unknown device, an
// unknown word, a third field, a control character, more than kMaxHealthFileBytes) is
// InvalidArgument naming the line, and the caller keeps the health it had: never half a file.
[[nodiscard]] absl::StatusOr<Health> ParseHealthFile(absl::string_view content,
                                                     const std::vector<std::string>& ids);

// Allocate: every requested id must be one of ours and appear once; InvalidArgument
// otherwise (the kubelet would hand a container a device we do not have).
[[nodiscard]] absl::Status CheckAllocation(const std::vector<std::string>& requested,
                                           const Health& devices);

// The environment a container gets for its devices: KMODD_TEST_DEVICES (the ids, comma
// separated, in request order) and KMODD_TEST_RESOURCE.
std::map<std::string, std::string> AllocationEnv(absl::string_view resource,
                                                 const std::vector<std::string>& ids);

// GetPreferredAllocation: the must-include ids first, then the lowest-numbered available
// ones, up to `size`; ids that are not ours are dropped. Deterministic, so that the same
// request always gets the same devices.
std::vector<std::string> PreferredAllocation(const std::vector<std::string>& available,
                                             const std::vector<std::string>& must_include,
                                             int32_t size, const Health& devices);

}  // namespace kmodd::test_device_plugin

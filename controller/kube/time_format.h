#pragma once

#include <string>

#include "absl/time/time.h"

namespace kmodd::kube {

// metav1.Time: RFC 3339 in UTC to the second ("2024-05-01T10:00:00Z").
std::string FormatKubeTime(absl::Time t);
// metav1.MicroTime: to the microsecond ("2024-05-01T10:00:00.000000Z"), as leases use.
std::string FormatKubeMicroTime(absl::Time t);

}  // namespace kmodd::kube

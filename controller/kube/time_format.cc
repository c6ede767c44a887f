#include "controller/kube/time_format.h"

namespace kmodd::kube {

std::string FormatKubeTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

std::string FormatKubeMicroTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone());
}

}  // namespace kmodd::kube

#include "api/phase.h"

namespace kmodd::api {

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kUnknown:
      return "Unknown";
    case Phase::kPending:
      return "Pending";
    case Phase::kPulling:
      return "Pulling";
    case Phase::kLoading:
      return "Loading";
    case Phase::kAvailable:
      return "Available";
    case Phase::kLoaded:
      return "Loaded";
    case Phase::kUnloading:
      return "Unloading";
    case Phase::kFailed:
      return "Failed";
  }
  return "Unknown";
}

std::optional<Phase> ParsePhase(std::string_view name) {
  if (name == PhaseName(Phase::kUnknown)) {
    return Phase::kUnknown;
  }
  for (Phase p : kAgentPhases) {
    if (name == PhaseName(p)) {
      return p;
    }
  }
  return std::nullopt;
}

}  // namespace kmodd::api

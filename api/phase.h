#pragma once

// The phase of one Module on one node: the one vocabulary the agent's journal, its status,
// the Sync protocol (kmodd.v1.Phase, mapped by proto/convert.h) and the controller's status
// share. docs/protocol.md has the table: what each phase means, who sets it, its wire name.

#include <array>
#include <optional>
#include <string_view>

namespace kmodd::api {

enum class Phase {
  // Nothing known: a report's PHASE_UNSPECIFIED or a value this build does not know, or,
  // in the controller's status, a planned node whose agent is away and never reported it.
  kUnknown,
  kPending,    // desired, not started (or waiting for a retry)
  kPulling,    // fetching the image
  kLoading,    // inserting (in-tree removal, firmware, dependencies)
  // In the kernel, as desired, its readiness checks (api/readiness.h) still running: the
  // seed's "Available". Not Ready: no .ready label, not done for a rollout.
  kAvailable,
  kLoaded,     // in the kernel, as desired, every readiness check passed: Ready
  kUnloading,  // being removed
  kFailed,     // the last action or its preparation failed
};

// Every phase an agent reports, in lifecycle order (kUnknown is no agent's).
inline constexpr std::array<Phase, 7> kAgentPhases = {
    Phase::kPending,   Phase::kPulling,   Phase::kLoading, Phase::kAvailable,
    Phase::kLoaded,    Phase::kUnloading, Phase::kFailed,
};

// "Pending", "Pulling", ...: the spelling of status documents, journals, logs and metrics.
// A C string (static), since this Abseil's StrCat takes no std::string_view.
const char* PhaseName(Phase p);
// PhaseName's inverse (exact spelling); nullopt for any other text.
std::optional<Phase> ParsePhase(std::string_view name);

}  // namespace kmodd::api

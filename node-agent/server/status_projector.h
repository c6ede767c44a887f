#pragma once

// The status projector: what a pass saw and did, as one status row per Module for
// AgentState (and so for agentctl and the controller's report). One row per desired Module
// (its phase derived by DerivePhase from what the pass knows of it), then one per Module
// the journal still records and nothing desires (unloading, or, under fail-static, kept as
// the journal has it). Pure, and table-tested.

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "node-agent/kernel/kernel.h"
#include "node-agent/reconcile/journal.h"
#include "node-agent/reconcile/prepare.h"
#include "node-agent/server/module_status.h"
#include "node-agent/server/pass_planner.h"
#include "node-agent/server/retry_gates.h"

namespace kmodd::agent {

// One desired Module of a pass: what it asked for and what preparing it found.
struct PreparedModule {
  PassModule input;
  reconcile::DesiredModule prepared;
  bool pulling = false;  // its image is being pulled: `prepared` holds no tree yet
};

// What became of a desired Module's image (the resolution of exactly its spec).
struct ImageFacts {
  absl::Status error;  // the pull failed
  std::string digest;  // of the image its tree came from, when it did
};

// Everything the projection reads besides the pass's Modules; all of it the pass's own.
struct StatusContext {
  std::string desired_version;
  FailStatic fail_static;
  const reconcile::Journal* journal = nullptr;
  const kernel::KernelState* observed = nullptr;
  const RetryGates* retries = nullptr;
  std::map<std::string, ImageFacts> images;  // by Module key
  std::optional<std::pair<std::string, ModuleFacts::Acting>> acting;  // the action under way
  // Staged firmware shadowing the host's, by Module key (shadow_checks.h).
  const std::map<std::string, std::vector<std::string>>* warnings = nullptr;
};

std::vector<ModuleStatus> ProjectStatus(const std::vector<PreparedModule>& modules,
                                        const StatusContext& ctx);

}  // namespace kmodd::agent

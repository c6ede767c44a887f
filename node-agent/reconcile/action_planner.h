#pragma once

// The agent's action planner, its pure core: (desired, observed kernel, journal) -> ordered
// kernel actions. No I/O. Not to be confused with the pass planner (server/pass_planner.h),
// which decides what one pass of the daemon works on and filters these actions, nor with
// the controller's planner (which Modules each node runs).
// Level-based: it never asks what changed, only what is and what should be.

#include <string>
#include <vector>

#include "node-agent/kernel/kernel.h"
#include "node-agent/reconcile/journal.h"
#include "node-agent/reconcile/prepare.h"

namespace kmodd::reconcile {

struct Action {
  enum class Kind { kUnload, kReloadInTree, kLoad };
  Kind kind;
  // The Module ("namespace/name"); for kReloadInTree the in-tree kernel module's name,
  // which never contains a '/'.
  std::string key;
  std::string why;  // for logs and `agentctl plan`
  bool operator==(const Action&) const = default;
};

// "unload", "reload-in-tree", "load": as logs, metrics and `agentctl plan` name them.
const char* KindName(Action::Kind k);

// Whether `d` is fully in place: recorded for this configuration, every module of its
// insert order live, and none of the in-tree modules it replaces loaded.
bool Converged(const DesiredModule& d, const kernel::KernelState& observed, const Journal& j);

// Unloads first (Modules no longer desired, or whose configuration changed), sorted by
// key; then reloads of the in-tree modules kmodd removed that no desired Module removes
// any more, last removed first (a holder after the module it holds); then loads, sorted
// by key. A desired Module keeps its in-tree modules out whatever its state: one whose
// preparation failed gets no action, and what it ran before keeps running (fail-static)
// while the problem is reported. Reloads are planned only for records of this boot.
std::vector<Action> PlanActions(const std::vector<DesiredModule>& desired,
                                const kernel::KernelState& observed, const Journal& journal);

}  // namespace kmodd::reconcile

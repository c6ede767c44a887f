#pragma once

// The agent's pure core: (desired, observed kernel, journal) -> ordered actions. No I/O.
// Level-based: it never asks what changed, only what is and what should be.

#include <string>
#include <vector>

#include "node-agent/kernel/kernel.h"
#include "node-agent/reconcile/journal.h"
#include "node-agent/reconcile/prepare.h"

namespace kmodd::reconcile {

struct Action {
  enum class Kind { kUnload, kLoad };
  Kind kind;
  std::string key;
  std::string why;  // for logs and `agentctl plan`
  bool operator==(const Action&) const = default;
};

// Whether `d` is fully in place: recorded for this configuration, every module of its
// insert order live, and none of the in-tree modules it replaces loaded.
bool Converged(const DesiredModule& d, const kernel::KernelState& observed, const Journal& j);

// Unloads first (Modules no longer desired, or whose configuration changed), then loads,
// each group sorted by key. A desired Module whose preparation failed gets no action: what
// it ran before keeps running (fail-static) and the problem is reported.
std::vector<Action> PlanActions(const std::vector<DesiredModule>& desired,
                                const kernel::KernelState& observed, const Journal& journal);

}  // namespace kmodd::reconcile

#pragma once

// The pass planner: what one pass of the reconciler works on, and which of the action
// planner's actions (reconcile/action_planner.h) it may carry out. Pure: no I/O and no clock
// (time is an input), so that the daemon's pass and `agentctl plan` (Reconciler::
// PreviewPass) decide alike, and so that it is table-tested.
//
// It owns three decisions:
//  - the inputs: the desired state with the debugging overrides of `agentctl load|unload`
//    applied (they last until the next desired state), each Module with its pull secret;
//  - fail-static (FailStatic): without a desired state, what kmodd runs stays as it is;
//  - retries (RetryGates): which keys wait after a failure, and until when.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "api/node_modules_config.h"
#include "node-agent/kernel/kernel.h"
#include "node-agent/reconcile/action_planner.h"
#include "node-agent/reconcile/journal.h"
#include "node-agent/reconcile/prepare.h"
#include "node-agent/server/retry_gates.h"

namespace kmodd::agent {

struct DesiredState {
  std::string version;
  std::string source;  // controller, journal (persisted, after a restart)
  std::vector<api::NodeModuleSpec> modules;
  std::map<std::string, std::string> pull_secrets;  // "<namespace>/<secret>" -> dockerconfigjson
};

// Fail-static, the one rule for both what a pass does and what its status says: until a
// desired state is known, nothing kmodd runs is unloaded (but what an unload override
// names) and no in-tree module is loaded again (a desired Module may still remove one).
struct FailStatic {
  bool authoritative = false;  // a desired state is known
  std::set<std::string> unload_overrides;

  // Whether Module `key`, which kmodd runs and nothing desires, stays as the journal has it.
  bool Keeps(const std::string& key) const {
    return !authoritative && unload_overrides.count(key) == 0;
  }
  // Whether a pass may carry out `a`.
  bool Allows(const reconcile::Action& a) const;
};

struct PassModule {
  api::NodeModuleSpec spec;
  std::string pull_secret;  // the .dockerconfigjson of its imageRepoSecret; "" = none
};

struct PassInputs {
  std::string version;  // of the desired state in force; "" = none
  std::vector<PassModule> modules;  // the desired state's, overrides applied
  FailStatic fail_static;
};

struct PassPlan {
  std::vector<reconcile::Action> actions;  // the action planner's order, fail-static applied
  std::vector<std::string> problems;       // "namespace/name: why", one per unprepared Module
};

// What a pass does with its prepared Modules, given the observed kernel and the journal
// (reconcile::ForgetBoot already applied). Retry gates are looked at per action, as it
// comes up (RetryGates::Open), since a pass's own failures close them.
PassPlan PlanPass(const FailStatic& fail_static,
                  const std::vector<reconcile::DesiredModule>& prepared,
                  const kernel::KernelState& observed, const reconcile::Journal& journal);

class PassPlanner {
 public:
  using Time = RetryGates::Time;

  explicit PassPlanner(BackoffPolicy retry) : gates_(retry) {}

  // Replaces the desired state; drops every override, and the in-tree reloads' gates (a
  // reload that failed for good waits for a new desired state).
  void SetDesired(DesiredState d);
  // Debugging overrides, until the next SetDesired; each reopens its Module's gate.
  // Return what to tell the user.
  std::string OverrideLoad(api::NodeModuleSpec spec);
  std::string OverrideUnload(const std::string& key);

  // What AgentState shows about the desired state in force.
  struct Summary {
    std::string version;
    std::string source;  // controller, journal, override; "" = none
    std::vector<std::string> overrides;  // "namespace/name (load|unload)"
  };
  Summary Describe() const;

  // The inputs of the next pass: the desired Modules in their order, a load override
  // replacing its Module's entry or appended, unload overrides left out. A Module whose
  // spec changed since it failed starts its retries afresh.
  PassInputs TakeInputs();

  // An action on `key` (or its image) ended with `s` at `now`; `unit` in [0, 1) jitters
  // the backoff. The gate remembers the spec in force for `key`.
  void RecordResult(const std::string& key, const absl::Status& s, Time now, double unit,
                    bool in_tree);

  RetryGates& gates() { return gates_; }
  const RetryGates& gates() const { return gates_; }

 private:
  std::optional<DesiredState> desired_;
  std::map<std::string, api::NodeModuleSpec> load_overrides_;
  std::set<std::string> unload_overrides_;
  RetryGates gates_;
};

}  // namespace kmodd::agent

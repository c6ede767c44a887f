#pragma once

// The rollout planner (issue 15): which selected nodes of a Module may run its new revision
// now, given the policy and what every node reports. Pure, like the placer: no clock (the
// time is an input), no I/O. The hub will apply its answer as it keeps a node under its
// plugin Pod: a node not admitted keeps the entry it was last sent.
//
// Order: the canaries first (the nodes the canary selector matches, else the first
// `canary` nodes), then the others, each group by node name: stable and documented, so an
// operator knows which nodes go next.
//
// Rules, applied in this order:
//   - Failed nodes over the budget (`max_failed`): halted. Nothing more is admitted; nodes
//     not yet started keep their previous driver. Failed nodes are rolled back when the
//     policy says so.
//   - A canary Failed: halted too, whatever the budget.
//   - Paused by a person: nothing more is admitted.
//   - Canary step: the canaries are admitted first (at most `max_parallel` at once); the
//     others wait until every canary is Ready and then a person resumes, or (with a soak)
//     until the last canary has been Ready for the soak time, or at once when the policy
//     does not pause after the canaries.
//   - At most `max_parallel` nodes are updating at any moment (admitted and not yet Ready
//     or Failed); without it, every node at once (KMM's behaviour).
//   - Complete when every selected node is Ready on the new revision.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kmodd::rollout {

// A count of nodes, or a percentage of the selected ones.
struct Amount {
  int64_t count = 0;
  std::optional<int> percent;  // 0-100; set: count is ignored
  // Against `total` nodes: a percentage rounds up for a step (at least one node when the
  // percentage is not 0) and down for a budget; see Step and Budget.
  int64_t Step(int64_t total) const;
  int64_t Budget(int64_t total) const;
  bool operator==(const Amount&) const = default;
};

struct Policy {
  std::optional<Amount> max_parallel;  // unset: every node at once
  int64_t canary = 0;                  // the first N nodes, when no selector
  std::map<std::string, std::string> canary_selector;  // set: the nodes it matches
  bool pause_after_canary = true;
  std::optional<int64_t> canary_soak_ms;  // set: resume on its own after this
  std::optional<Amount> max_failed;       // unset: no budget
  bool rollback = true;                   // Failed nodes go back to their previous config
};

// Where a node is with the new revision, as its agent reports it.
enum class Progress { kNotStarted, kUpdating, kReady, kFailed };

struct NodeInput {
  std::string name;
  std::map<std::string, std::string> labels;
  Progress progress = Progress::kNotStarted;
  int64_t ready_since_ms = 0;  // when it became Ready (kReady)
  // Its agent is connected: a node that is not is skipped when admitting (it would hold a
  // place of max_parallel it cannot use) and taken in its turn once it is back.
  bool available = true;
};

struct Input {
  Policy policy;
  std::vector<NodeInput> nodes;  // the nodes the Module selects, any order
  bool paused = false;           // a person paused the rollout
  bool resumed = false;          // a person resumed it after the canaries
  int64_t now_ms = 0;
};

enum class Phase { kProgressing, kPaused, kWaitingAfterCanary, kHalted, kComplete };
const char* PhaseName(Phase p);

struct Output {
  Phase phase = Phase::kProgressing;
  std::set<std::string> admitted;  // may run the new revision (those already started included)
  std::set<std::string> rollback;  // Failed, to be sent their previous config
  std::vector<std::string> order;  // every node, in rollout order
  std::set<std::string> canaries;
  int64_t updating = 0;
  int64_t ready = 0;
  int64_t failed = 0;
  int64_t waiting = 0;  // not started, not admitted
  // Set: the planner's answer changes then with nothing else changing (a soak's end).
  std::optional<int64_t> recheck_at_ms;
  std::string message;  // one sentence for the Module's status
};

Output Plan(const Input& in);

}  // namespace kmodd::rollout

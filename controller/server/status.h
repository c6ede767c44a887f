#pragma once

// Module status in standalone mode, aggregated from the plan and the agents' reports.
// PURE: the caller passes the time and everything it knows; no I/O, no clock, no protobuf.
//
// Per Module, KMM's `status.moduleLoader` counters
//   nodesMatchingSelectorNumber: nodes the Module may run on (KMM's "schedulable"): the
//                                selector matches and no untolerated NoExecute taint
//   desiredNumber:               nodes planned to run it (run or held)
//   availableNumber:             of those, connected nodes that report it Loaded (at the
//                                planned version, when the Module sets one)
// plus kmodd's per-node rows (phase, message, image digest, since) and conditions:
//   Available           every planned node has it loaded
//   Degraded            a planned node reports Failed
//   Accepted            its current spec passed validation; False (reason Invalid) names the
//                       fields. A rejected Module that was accepted before keeps its last
//                       accepted spec in force; one never accepted is listed with zero counts.
//   PullSecretResolved  only when spec.imageRepoSecret is set and the Secret was looked up
//                       (Kubernetes mode): False names the Secret and what to do.
// The status file also lists the nodes and the manifests rejected.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/value.h"
#include "api/diagnostic.h"
#include "api/module.h"
#include "api/phase.h"
#include "controller/placement/placer.h"
#include "controller/server/plugin_pods.h"

namespace kmodd::server {

// What an agent last reported about one module.
struct ReportedModule {
  std::string key;    // namespace/name
  api::Phase phase = api::Phase::kUnknown;
  std::string message;
  std::string image_digest;
  std::string version;
  int64_t since_unix_ms = 0;
  std::string image;  // the reference the agent was asked for (its desired entry's)
  std::string desired_version;  // the desired state this row answers
  bool operator==(const ReportedModule&) const = default;
};

// What the controller knows about one node.
struct NodeRecord {
  std::string name;
  bool connected = false;
  int64_t since_unix_ms = 0;  // connected, or disconnected, since
  std::string kernel_release;
  std::string boot_id;
  std::string agent_version;
  std::string pushed_version;   // the last desired state sent
  std::string acked_version;    // the last one the agent accepted
  std::string nacked_version;   // the last one it refused, and why
  std::string nack_error;
  std::string applied_version;  // what the agent says it works on
  std::vector<ReportedModule> modules;  // sorted by key; only what concerns the node
  uint64_t ignored_modules = 0;  // entries this stream reported that were left out
  // The current stream (connected) has reported what the node runs: until then `modules`
  // is the last stream's, or empty after a restart.
  bool reported = false;
};

// What the last look-up of a pull Secret found.
struct PullSecretState {
  bool readable = false;
  std::string reason;   // NotFound, WrongType, Forbidden (empty when readable)
  std::string message;  // names the Secret; what to do
  bool operator==(const PullSecretState&) const = default;
};

// A Module's rollout (Modules with a ModulePolicy): the policy's name, the phase and the
// nodes per state, from the rollout planner.
struct RolloutState {
  std::string policy;    // "<namespace>/<name>" of the ModulePolicy
  std::string revision;  // the Module's revision being rolled out
  // Progressing, Paused, WaitingAfterCanary, Halted, Complete, Undone, NoModule, Settling
  std::string phase;
  std::string message;
  int64_t nodes = 0;     // selected nodes
  int64_t updated = 0;   // sent the revision (Updating, Ready or Failed)
  int64_t updating = 0;
  int64_t ready = 0;
  int64_t failed = 0;
  int64_t waiting = 0;   // not started
  int64_t rolled_back = 0;
  std::vector<std::string> canaries;
  std::vector<std::string> failed_nodes;  // "<node>: <why>", at most 20
  bool operator==(const RolloutState&) const = default;
};

struct StatusInput {
  std::vector<const api::Module*> modules;  // every Module in force, sorted by key
  std::vector<placement::NodePlacement> plans;        // every node's plan, sorted by node name
  std::vector<const NodeRecord*> nodes;     // sorted by name
  // Rejected manifests. Those naming a Module (object "Module <namespace>/<name>") make its
  // Accepted condition False.
  std::vector<api::Diagnostic> errors;
  std::set<std::string> held;  // rejected Modules that hold the nodes that run them
  std::map<std::string, PullSecretState> pull_secrets;  // by "<namespace>/<name>"
  // Kubernetes mode: the plugin Pods by node (status.devicePlugin and status.dra counters).
  const std::map<std::string, NodePluginPods>* plugin_pods = nullptr;
  // The rollouts by Module key (Modules with a ModulePolicy).
  std::map<std::string, RolloutState> rollouts;
  bool serving = true;  // desired state is sent (the Modules were once read without errors)
  bool active = true;   // this replica serves agents (the leader, in Kubernetes mode)
  std::string run_id;
  int64_t now_unix_ms = 0;
};

struct Condition {
  std::string type;
  std::string status;  // True, False
  std::string reason;
  std::string message;
  bool operator==(const Condition&) const = default;
};

// One node's row in a Module's status: what the node reported; Pending when planned and
// its connected agent has not reported yet, Unknown when its agent is away and never did.
// A skipped row (the Module matches the node but is not planned there, and the node does
// not report it) says why in its message and shows as Skipped instead of a phase.
struct NodeModuleStatus {
  std::string node;
  api::Phase phase = api::Phase::kPending;
  std::string message;
  std::string image_digest;
  int64_t since_unix_ms = 0;
  bool connected = true;
  bool skipped = false;
  bool operator==(const NodeModuleStatus&) const = default;
};

// The row's phase as status documents spell it: the phase's name, or Skipped.
const char* RowPhase(const NodeModuleStatus& row);

struct ModuleState {
  std::string namespace_;
  std::string name;
  api::DaemonSetStatus module_loader;
  // Written for a Module with spec.devicePlugin (spec.dra): KMM's counters, from the nodes
  // where its Pods may be scheduled (placement::PodSchedulable) and its Ready Pods.
  std::optional<api::DaemonSetStatus> device_plugin;
  std::optional<api::DaemonSetStatus> dra;
  std::vector<Condition> conditions;
  std::vector<NodeModuleStatus> nodes;  // sorted by node
  std::optional<RolloutState> rollout;  // with a ModulePolicy
};

struct ControllerStatus {
  std::string run_id;
  int64_t generated_unix_ms = 0;
  bool serving = true;
  bool active = true;
  std::vector<ModuleState> modules;
  std::vector<NodeRecord> nodes;
  std::vector<api::Diagnostic> errors;
};

ControllerStatus Aggregate(const StatusInput& in);

// A Module's status (moduleLoader, conditions, per-node rows): the Module's status
// subresource in Kubernetes mode and its `status` in the status document, one shape.
Value ModuleStatusValue(const ModuleState& m);
// A Module's status.rollout.
Value RolloutValue(const RolloutState& r);

// The status document (the status file's content, as YAML or JSON).
Value ToValue(const ControllerStatus& s);

// Reads a status document back (YAML or JSON) for `kmodd-controller status`.
[[nodiscard]] absl::StatusOr<Value> ParseStatusDocument(std::string_view text);

std::string Rfc3339(int64_t unix_ms);

}  // namespace kmodd::server

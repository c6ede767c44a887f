#pragma once

// The standalone controller's state: the Modules in force, the planner, and every node an
// agent has connected for. It decides what each node is sent and when: a node gets its
// desired state when its stream says hello, and again only when the planner says that
// node's desired modules changed. gRPC stays outside: streams are AgentStreams.
//
// Nothing is sent before the source has once been read without errors: a controller that
// restarts with a broken manifest must not tell every node to unload the Modules that
// manifest defines. Until then agents connect, report, and keep what they run
// (fail-static); after that, a rejected manifest keeps its Modules (see ModuleFiles).
// A source that names every rejected Module (Kubernetes mode) narrows this to the Modules
// it holds (SourceUpdate::held): only a node that reports one of them, or has not yet
// reported what it runs, waits; the others are served.
//
// In Kubernetes mode, while a device plugin or DRA driver Pod of a Module is on a node
// (SetPluginPods), the node keeps the entry of that Module it was last sent when the plan
// changes it or takes it away: the driver is not unloaded or swapped under its plugin.
// The node labeler takes the target label off such a node (Draining), so that the
// plugin's DaemonSet evicts its Pod there; once no Pod of the Module is left, the node is
// sent its plan. KMM's ordered upgrade does the same with its worker-pod label. A node this
// run has sent nothing yet has no such entry: with HubOptions::wait_for_plugin_pods it is
// sent nothing while its plan would change a Module under a plugin Pod.
//
// A node's report is believed only about what concerns that node (report_filter.h): the
// rest is ignored, counted in its NodeRecord and logged once per stream (then at most
// every log_every). Reports over HubOptions::limits are refused and end the stream. The
// work that grows with a report (conversion, checks, sorting) runs outside the lock; under
// it, only lookups and one merge with the previous report.
//
// A Module with a ModulePolicy (SourceUpdate::policies) reaches its nodes as a rollout
// (controller/rollout/rollout.h, hub_rollout.cc): a node the rollout has not admitted keeps
// the entry of that Module it was last sent, as under a plugin Pod; a node that failed on
// the Module's revision is sent the entry it last ran well (rollback), unless the policy
// says to leave it; `rollout undo` sends every node of the revision back. Where a node is
// comes from its reports: an entry counts as applied once the agent reports a status for
// the desired state that first carried it (ModuleStatus.desired_version).
//
// Thread-safe: sources, streams and the status writer call in from their own threads.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/clock.h"
#include "common/log.h"
#include "api/module.h"
#include "api/module_policy.h"
#include "controller/rollout/rollout.h"
#include "controller/placement/placer.h"
#include "controller/server/metrics.h"
#include "controller/server/plugin_pods.h"
#include "controller/server/status.h"
#include "controller/server/wire.h"
#include "controller/source/dir_source.h"
#include "kmodd/v1/sync.pb.h"

namespace kmodd::server {

// One agent's stream as the hub sees it. Called with the hub's lock held: implementations
// must not block and must not call back into the hub.
class AgentStream {
 public:
  virtual ~AgentStream() = default;
  // Sends a desired state. One not yet on the wire may be replaced by a newer one.
  virtual void Push(std::shared_ptr<const v1::NodeDesired> desired) = 0;
  // Ends the stream (a newer stream for the same node replaced it).
  virtual void Close(const absl::Status& why) = 0;
};

// What changed since a change number (Hub::WaitForChanges): which nodes' records or API
// Nodes. Plans, Module status and pull Secrets are not itemised: a reader that needs them
// reads the status again.
struct HubChanges {
  uint64_t number = 0;  // the change number this runs up to
  // Too far behind for the journal (or change number 0): take every node as changed.
  bool all = false;
  std::set<std::string> nodes;
};

// A node to drain before a Module's driver on it is replaced or removed (ModulePolicy
// spec.drain, Kubernetes mode): kube_mode/drainer.h cordons it and evicts the Pods.
struct DrainRequest {
  std::string node;
  std::string module;  // namespace/name
  std::string target;  // identifies the entry the drain is for (Hub::DrainDone echoes it)
  api::DrainSpec spec;
};

struct HubOptions {
  std::string run_id;  // the "<run id>" of every version this run sends
  // A node whose agent has been away this long is forgotten (its plan dropped).
  std::chrono::milliseconds forget_after = std::chrono::minutes(10);
  // Kubernetes mode: nodes are the API's Node objects (SetApiNode). A hello supplies only
  // the connection; its labels and kernel never reach the planner, and a node the API does
  // not list is sent nothing (its agent keeps what it runs).
  bool nodes_from_api = false;
  // Kubernetes mode with the plugin Pod watch: a node this run has sent nothing yet waits
  // for the first list of the Pods and, when a plugin Pod is on it, for its report, and is
  // sent nothing while its plan would unload or swap a Module under such a Pod (after a
  // restart this run has no earlier entry to keep the node at; Draining takes the plugin
  // off first). Without it, nodes are served at once (standalone mode, tests).
  bool wait_for_plugin_pods = false;
  // Kubernetes mode: nothing is sent before the first SetPolicies (the ModulePolicy list),
  // so that a restart in the middle of a rollout does not push it to every node at once.
  bool wait_for_policies = false;
  // 0: a rollout is planned again at once after each report, connection and Node change
  // (tests). Otherwise by the hub's own thread, at most once per this interval: at 5,000
  // nodes a plan per report cost the controller 64 s of CPU for one rollout.
  std::chrono::milliseconds rollout_batch{0};
  // Standalone mode: for this long after the hub starts no rollout starts a node. The nodes
  // are the connected agents, and after a restart they come back one by one: a rollout
  // planned from the first few would take them for the canaries (the first by name).
  std::chrono::milliseconds rollout_settle{0};
  // Kubernetes mode with drains: called (under the hub's lock: it must only queue) to drain
  // a node, and to release it (uncordon) once it is Ready on the Module's new entry.
  std::function<void(const DrainRequest&)> drain{};
  std::function<void(const std::string& node, const std::string& module)> undrain{};
  // What one report may carry (wire.h).
  ReportLimits limits = {};
  // Ignored entries and refused reports are logged once per stream, and for one node at
  // most once a minute, and again within a stream at most this often (with the count).
  std::chrono::milliseconds log_every = std::chrono::minutes(10);
};

// The same driver entry: what the agent loads. The readiness checks are left out: a node
// runs the policy's current ones on whatever entry it keeps, and a change of the checks
// alone neither reloads the driver nor moves its device plugin.
bool SameDriverEntry(const v1::ModuleSpec& a, const v1::ModuleSpec& b);

class Hub {
 public:
  // `clock` stamps records and status (wall time) and times WaitForChange; it outlives the hub.
  Hub(HubOptions options, const Clock& clock, Logger& log);
  ~Hub();
  Hub(const Hub&) = delete;
  Hub& operator=(const Hub&) = delete;

  // New, changed and removed Modules, and the manifests currently rejected.
  void ApplySource(const source::SourceUpdate& update);

  // The first message of a stream: registers the node and pushes its desired state.
  // InvalidArgument when the hello names no node.
  [[nodiscard]] absl::Status Hello(AgentStream* stream, const v1::NodeInfo& info);
  // Every later message (and the hello's ack and modules). An error ends the stream:
  // ResourceExhausted or InvalidArgument for a report over HubOptions::limits (nothing of
  // it is taken). Reports of one stream come one at a time.
  [[nodiscard]] absl::Status Report(AgentStream* stream, const v1::NodeReport& report);
  // The stream ended. The node keeps its plan and its last report, marked disconnected.
  void Goodbye(AgentStream* stream);

  // Forgets the nodes away for longer than forget_after; returns how many. Nodes the API
  // lists are never forgotten: they are planning targets whether or not an agent is there.
  size_t ForgetGone();

  // Kubernetes mode: a Node as the API has it (labels, taints, nodeInfo), and its removal.
  void SetApiNode(api::Node node);
  void RemoveApiNode(const std::string& name);
  // Kubernetes mode: the .dockerconfigjson of a pull secret ("<namespace>/<name>"), or
  // nullopt when it cannot be read. Nodes whose plan names it are pushed again.
  void SetPullSecret(const std::string& key, std::optional<std::string> docker_config);
  // Kubernetes mode: what the last look-up of that Secret found, for the status of the
  // Modules that name it (a transient failure leaves the last state).
  void SetPullSecretState(const std::string& key, PullSecretState state);
  // Leader election: an inactive hub refuses hellos (UNAVAILABLE, so that agents reconnect
  // and reach the leader) and, on becoming inactive, ends every stream. Active by default.
  void SetActive(bool active);
  bool active();

  // Blocks until the status changed after change number `seen`, or until `timeout` has
  // passed on the hub's clock (a duration, so that no caller mixes in another clock's
  // deadline); returns the current change number.
  uint64_t WaitForChange(uint64_t seen, std::chrono::nanoseconds timeout);
  // The same, with the nodes that changed after `seen` (see HubChanges).
  HubChanges WaitForChanges(uint64_t seen, std::chrono::nanoseconds timeout);
  // Wakes every WaitForChange, as a change does (on shutdown, for a last status).
  void WakeAll();

  // How many node changes the journal keeps for WaitForChanges.
  static constexpr size_t kJournal = 8192;

  ControllerStatus Status();
  std::optional<NodeRecord> Node(const std::string& name);
  // The Module in force, by "<ns>/<name>"; nullopt when there is none.
  std::optional<api::Module> ModuleObject(const std::string& key);
  // The Modules in force that have a spec.devicePlugin or a spec.dra, by key.
  std::vector<api::Module> PluginModules();

  // Kubernetes mode: the plugin Pods on every node, after a (re)list of them (nodes not
  // named have none), and then one node's whenever they change.
  void SetAllPluginPods(std::map<std::string, NodePluginPods> by_node);
  void SetPluginPods(const std::string& node, const NodePluginPods& pods);
  // The plugin Pods on a node; nullopt until the first SetAllPluginPods.
  std::optional<NodePluginPods> PluginPods(const std::string& node);
  // The Modules with a device plugin or DRA driver whose plan on `node` is not what its
  // agent reports running (another image or version: an upgrade waiting for the plugin to
  // leave, or under way), or that the node is held at because a plugin Pod is there.
  std::set<std::string> Draining(const std::string& node);
  size_t ConnectedCount();

  // What the hub counted since it started (metrics.h).
  HubCounters Counters();

  // The rollouts of the Modules with a ModulePolicy, by Module key.
  std::map<std::string, RolloutState> Rollouts();
  // Re-plans the rollouts whose canary soak ended; called about once a second.
  void Tick();
  // Kubernetes mode: every ModulePolicy in force, by the Module it governs (standalone
  // mode: SourceUpdate::policies).
  void SetPolicies(const std::map<std::string, api::ModulePolicy>& policies);
  // The drain of DrainRequest (node, module, target) ended: `drained`, or timed out with
  // `message` saying what was left. The node is sent what the rollout gives it now.
  void DrainDone(const std::string& node, const std::string& module, const std::string& target,
                 bool drained, const std::string& message);

 private:
  // One node's part in the rollouts of one Module (by Module key in Entry::rollout).
  struct NodeRollout {
    uint64_t seq = 0;  // the push that first carried the entry the node is sent now
    uint64_t checks_seq = 0;  // the push that first carried its readiness checks as sent now
    std::optional<v1::ModuleSpec> good;    // the last entry it reported Loaded on
    std::optional<v1::ModuleSpec> before;  // `good` when the entry sent now was first sent
    std::string failed_revision;           // it failed on this revision of the Module
    rollout::Progress progress = rollout::Progress::kNotStarted;
    bool in_rollout = false;  // the Module is planned on the node (progress is meaningful)
    bool rolled_back = false;  // failed on the revision, Loaded again on `before`
    int64_t ready_since_ms = 0;
    std::string failure;  // the agent's message when it failed
    // Drain (spec.drain) before the entry changes: for which entry, and where it stands.
    enum class Drain { kNone, kRequested, kDone, kTimedOut };
    Drain drain = Drain::kNone;
    std::string drain_target;
    std::string drain_message;
  };
  // What a rollout lets a node be sent for one Module.
  enum class Gate { kPlan, kKeep, kRollBack };

  struct Entry {
    NodeRecord record;
    api::Node node;                  // what the planner was last given
    AgentStream* stream = nullptr;   // null while disconnected
    std::shared_ptr<const v1::NodeDesired> desired;  // the last one built
    bool stale = true;               // the plan changed since `desired` was built
    bool from_api = false;           // Kubernetes mode: the API lists this node
    bool sent = false;               // this stream was sent `desired` (owed when not)
    bool reported = false;           // this stream reported what the node runs
    // Keys of every desired state this run sent the node: it may report them.
    std::set<std::string> sent_keys;
    // Reported before the source was first read, when nothing could be checked: filtered
    // then (Module status and labels wait for it anyway).
    std::optional<std::vector<ReportedModule>> unfiltered;
    // Modules the last desired state kept at their previous entry for a plugin Pod.
    std::set<std::string> holding;
    // What the placement plans for the node, before any rollout or hold (PlannedLocked).
    mutable std::shared_ptr<const v1::NodeDesired> planned;
    mutable bool planned_stale = true;
    std::map<std::string, NodeRollout> rollout;  // by Module key, Modules with a policy
    int64_t push_ms = 0;        // when the desired state `push_version` was sent (ACK latency)
    std::string push_version;
    bool logged_this_stream = false;  // ignored entries were logged for this stream
    int64_t logged_unix_ms = 0;       // the last ignored or refused report logged
    uint64_t unlogged = 0;            // entries ignored since
  };

  // Marks the nodes' plans changed and pushes to the connected ones (once serving);
  // returns how many.
  size_t PushChangedLocked(const std::vector<std::string>& nodes);
  void PushLocked(const std::string& name, Entry& e);
  // In `next`, the entries of the Modules with a plugin Pod on node `name` as they were in
  // `before` when they differ or are gone (see the header); records them in e.holding.
  void HoldForPluginPodsLocked(const std::string& name, Entry& e, const v1::NodeDesired& before,
                               v1::NodeDesired& next);
  // A node's plugin Pods changed: pushes when which Modules have one changed.
  void PluginPodsChangedLocked(const std::string& node, const NodePluginPods& before,
                               const NodePluginPods& after);
  void SetNodeLocked(Entry& e, api::Node node);
  // A change; `node`'s record or API Node is part of it (none: "").
  void ChangedLocked(const std::string& node = "");
  // A node changed within a change about to be made (ChangedLocked follows).
  void JournalLocked(const std::string& node);
  // Whether the node may be sent a desired state now.
  bool PushableLocked(const Entry& e) const;
  // Whether the node may run a held Module: it reports one, or has not reported yet.
  bool HeldLocked(const Entry& e) const;
  // HubOptions::wait_for_plugin_pods: whether the node's first desired state waits.
  bool WaitsForPluginLocked(const Entry& e) const;
  // Draining, the hub's lock held.
  std::set<std::string> DrainingLocked(const std::string& node, const Entry& e) const;
  // Pushes to every node that may be sent a desired state it has not been sent; how many.
  size_t PushOwedLocked();
  // Takes a node's checked report: keeps what concerns it, logs phase changes; returns the
  // list it replaced (for the caller to free after unlocking). `ignored` entries were
  // already left out (bad names, repeats).
  std::vector<ReportedModule> TakeModulesLocked(const std::string& name, Entry& e,
                                                std::vector<ReportedModule> modules,
                                                size_t ignored, const std::string& example);
  // Takes the source's finalized Modules; sets ours_ and inherited_.
  void UpdateInheritedLocked(const source::SourceUpdate& update);
  // Whether a log about this node's reports may be written now (see log_every); when true,
  // the caller logs and the node's log clock restarts.
  bool MayLogLocked(Entry& e);

  // Unix milliseconds on clock_.
  int64_t NowMs() const;

  // ---- rollouts (hub_rollout.cc) ----
  struct ModuleRollout {
    api::ModulePolicy policy;
    RolloutState state;
    rollout::Output plan;
    bool dirty = true;  // to plan again
    bool full = true;   // every node's progress to compute again (else NodeRollout's)
  };
  // The node's plan before rollouts and holds, rebuilt when its placement changed.
  const v1::NodeDesired& PlannedLocked(const std::string& name, const Entry& e) const;
  // Takes a new set of policies; marks what changed.
  // True when a Module's readiness checks changed: every node's entry must be planned again.
  bool SetPoliciesLocked(const std::map<std::string, api::ModulePolicy>& policies);
  std::vector<std::string> NodeNamesLocked() const;
  // Where the node is with Module `key` (updates its NodeRollout); nullopt when the Module
  // is not planned there.
  std::optional<rollout::Progress> ProgressLocked(const std::string& name, Entry& e,
                                                  const std::string& key, ModuleRollout& r);
  // Plans the rollouts marked dirty; returns the nodes whose gate changed (to push).
  std::vector<std::string> PlanRolloutsLocked();
  // A report or a push may have moved the node on: marks its rollouts dirty.
  void NodeRolloutChangedLocked(const std::string& name, Entry& e);
  Gate GateLocked(const std::string& name, const Entry& e, const std::string& key,
                  const ModuleRollout& r) const;
  // Applies the rollouts to a desired state being built from the plan; records what was
  // sent (NodeRollout::seq, before). `old` is what the node was last sent.
  void ApplyRolloutsLocked(const std::string& name, Entry& e, const v1::NodeDesired* old,
                           v1::NodeDesired& next, uint64_t seq);
  // Whether a node this run has sent nothing yet must wait: a rollout keeps it at a
  // Module it reports and this run has no entry of to keep it at.
  bool WaitsForRolloutLocked(const std::string& name, const Entry& e) const;
  // Something a rollout depends on changed (dirty rollouts): plans now, or wakes the
  // rollout thread (HubOptions::rollout_batch).
  void RolloutsChangedLocked();
  // The rollout thread's loop.
  void RunRollouts();
  // Whether the node's report of Module `key` as Loaded counts as Ready: in Kubernetes mode
  // once the API's Node carries its .ready label.
  bool ReadyLabelSeenLocked(const Entry& e, const std::string& key) const;
  // The sequence number of a version this run sent ("<run id>-<n>"); 0 for another run's.
  uint64_t SeqOf(const std::string& version) const;

  const HubOptions options_;
  const Clock& clock_;
  Logger& log_;

  std::mutex mu_;
  std::condition_variable changed_cv_;
  uint64_t changes_ = 0;
  // (change number, node) for the last kJournal node changes; changes numbered up to
  // journal_floor_ are no longer itemised.
  std::deque<std::pair<uint64_t, std::string>> journal_;
  uint64_t journal_floor_ = 0;
  uint64_t seq_ = 0;
  bool serving_ = false;  // the source has been read once without errors
  std::set<std::string> held_;  // SourceUpdate::held, the last one
  bool source_seen_ = false;    // ApplySource was called: reports can be checked
  std::set<std::string> finalized_;  // SourceUpdate::finalized, the last one
  // Modules this run put its finalizer on (in force while active, without it): only the
  // nodes this run sent them to may report them.
  std::set<std::string> ours_;
  // finalized_ less ours_, and held_: Modules an earlier run may have sent to any node.
  std::set<std::string> inherited_;
  bool active_ = true;
  std::map<std::string, std::string> pull_secrets_;  // "<namespace>/<name>" -> dockerconfigjson
  std::map<std::string, PullSecretState> pull_secret_states_;  // idem
  placement::Placer placer_;
  std::map<std::string, api::Module> modules_;  // in force, by key (for the status)
  std::vector<api::Diagnostic> errors_;
  std::map<std::string, Entry> nodes_;
  std::map<std::string, NodePluginPods> plugin_pods_;  // by node; none listed: no entry
  bool plugin_pods_synced_ = false;
  std::map<std::string, ModuleRollout> rollouts_;  // by Module key: the policies in force
  bool policies_synced_ = false;  // SetPolicies was called (HubOptions::wait_for_policies)
  HubCounters counters_;
  int64_t started_ms_ = 0;  // when the hub was made (HubOptions::rollout_settle)
  bool stopping_ = false;         // the rollout thread ends
  std::condition_variable rollout_cv_;
  std::thread rollout_thread_;    // with HubOptions::rollout_batch
  std::unordered_map<AgentStream*, std::string> streams_;
};

}  // namespace kmodd::server

#pragma once

// Kubernetes mode's writer: what the agents report, written back to the API server.
//   - Node labels KMM users depend on, from the agents' reports:
//       kmm.node.kubernetes.io/<ns>.<name>.ready          while the agent reports it Loaded
//       kmm.node.kubernetes.io/<ns>.<name>.version.ready  = the version, idem, when versioned
//     diffed against the Node's labels and merge-patched (null removes), on the next hub
//     change: a label goes within milliseconds of the report that the module is gone. A
//     label the API server refuses holds back no other (node_labels.h). No
//     kernel-version.full label: KMM writes none, and a kernel such as GKE's "6.1.90+" is
//     no valid label value; one an earlier kmodd wrote is removed.
//   - Node Events ModuleLoaded / ModuleUnloaded when a .ready label is added / removed,
//     as KMM writes them, after every label, status and finalizer write of the pass: no one
//     waits on them.
//   - Module status (KMM's moduleLoader counters, conditions, kmodd's per-node rows),
//     merge-patched on the status subresource only when it changed; rejected Modules
//     included (Accepted=False names the fields). A Warning Event on the Module for each
//     new Accepted=False or PullSecretResolved=False (reasons Rejected, PullSecretNotFound,
//     PullSecretWrongType, PullSecretInvalidContent, PullSecretForbidden).
//   - The finalizer kmodd.io/unload on every Module in the plan (a Module rejected before it
//     was ever accepted gets none); on deletion, removed once no connected agent reports
//     the Module any more (disconnected nodes do not hold it up).
// Only while `is_leader` says so; on becoming leader everything is checked again.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/value.h"
#include "controller/kube/client.h"
#include "controller/kube/events.h"
#include "controller/server/hub.h"
#include "controller/kube_mode/node_labels.h"
#include "controller/server/status.h"
#include "controller/kube_mode/kube_source.h"

namespace kmodd::server {

inline constexpr const char* kFinalizer = source::kUnloadFinalizer;
// Written by kmodd before KMM fidelity (issue 11), no longer; still owned, so removed.
inline constexpr char kKernelVersionLabel[] = "kmm.node.kubernetes.io/kernel-version.full";

// KMM's label names.
std::string ReadyLabel(const std::string& ns, const std::string& name);
std::string VersionReadyLabel(const std::string& ns, const std::string& name);
// Whether kmodd sets (and so may remove) this label.
bool IsOwnedLabel(const std::string& key);

// The labels kmodd wants on a node, from its agent's last report.
Labels DesiredLabels(const NodeRecord& node);
// The merge patch taking `current`'s owned labels to `desired`; nullopt when equal.
std::optional<Value> LabelPatch(const Labels& current, const Labels& desired);

enum class FinalizerAction { kNone, kAdd, kRemove };
// `still_reported`: some connected agent reports the Module (any phase).
FinalizerAction NextFinalizerAction(const source::ModuleMeta& m, bool still_reported);
// The merge patch setting the finalizers (with a resourceVersion precondition).
Value FinalizerPatch(const source::ModuleMeta& m, FinalizerAction action);

class KubeWriter {
 public:
  KubeWriter(kube::KubeClient& client, Hub& hub, source::KubeSource& source,
             kube::EventRecorder& events, std::function<bool()> is_leader, Logger& log);
  ~KubeWriter();
  KubeWriter(const KubeWriter&) = delete;
  KubeWriter& operator=(const KubeWriter&) = delete;

  void Start();
  void Stop();

  // One pass over everything (the thread calls it; tests call it directly).
  void SyncOnce();

  static constexpr std::chrono::seconds kRecheck{30};

 private:
  void Run();
  // A Node Event owed for a label change or refusal, recorded at the end of the pass.
  struct PendingEvent {
    source::NodeMeta node;
    NodeEvent event;
  };
  // One Node's label write.
  struct LabelJob {
    source::NodeMeta node;
    Labels desired;
    std::optional<Value> patch;  // nullopt: the Node has them all
    LabelWrite write;
  };
  // Patches the labels; returns the Events those changes owe.
  std::vector<PendingEvent> SyncLabels(const ControllerStatus& st);
  // Takes in what a write did: refusals, what is applied, the Events owed.
  void Settle(LabelJob& j, std::chrono::steady_clock::time_point now,
              std::vector<PendingEvent>& events);
  void SyncStatus(const ControllerStatus& st);
  // Warning Events for the Module's Accepted=False and PullSecretResolved=False conditions
  // not yet reported.
  void WarnOnModule(const ModuleState& m, const std::string& uid);
  void SyncFinalizers(const ControllerStatus& st);
  void Event(const PendingEvent& e);

  kube::KubeClient& client_;
  Hub& hub_;
  source::KubeSource& source_;
  kube::EventRecorder& events_;
  const std::function<bool()> is_leader_;
  Logger& log_;

  bool was_leader_ = false;
  // node -> owned labels last patched; forgotten every kRecheck so that a label someone
  // removed by hand comes back.
  std::map<std::string, Labels> applied_;
  std::chrono::steady_clock::time_point applied_since_;
  RefusedLabels refused_;
  std::map<std::string, std::string> statuses_;  // Module key -> status last written (JSON)
  std::map<std::string, std::set<std::string>> warned_;  // Module key -> problems evented
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kmodd::server

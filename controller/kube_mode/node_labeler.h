#pragma once

// The writer's node-label duty, one Node per call (key "node/<name>"):
//   kmm.node.kubernetes.io/<ns>.<name>.ready          while the agent reports it Loaded
//   kmm.node.kubernetes.io/<ns>.<name>.version.ready  = the version, idem, when versioned
//   kmm.node.kubernetes.io/<ns>.<name>.device-plugin-target  for a Module with a device
//       plugin that selects the node while it is schedulable for it (not cordoned, its
//       NoSchedule/NoExecute taints tolerated; KMM's rule, so that a drain evicts the plugin),
//       and while its driver is not about to change there (Hub::Draining: the plugin leaves
//       first, then the driver is swapped, then the label comes back)
//   kmm.node.kubernetes.io/<ns>.<name>.dra-target  the same for a DRA driver (kmodd's: KMM
//       has none, so a drain cannot evict its driver, KMM's #1328)
//   beta.kmm.node.kubernetes.io/version-schedule-pod.<ns>.<name> = the version the agent
//       reports Loaded, for a versioned Module with a plugin, unless draining (which
//       version's plugin DaemonSet runs there, as KMM's ordered upgrade)
//   kmm.node.kubernetes.io/<ns>.<name>.device-plugin-ready / .dra-ready  while a Pod of
//       that role of the Module is Ready on the node (the Pod watch; until its first list,
//       these labels stay as they are)
// diffed against the Node's labels as watched and merge-patched (null removes); then the
// Node Events ModuleLoaded / ModuleUnloaded for the .ready labels that patch added or
// removed, as KMM writes them, and a Warning for a label the API server refused.
//
// A node with no report from its current stream keeps its labels as they are: a new
// leader, or a restarted controller, has not heard from its agents yet, and they keep
// their modules loaded meanwhile; removing the labels would strip a fleet's .ready labels
// at every failover. A refused label holds back no other (node_labels.h) and is asked
// again after RefusedLabels::kRetry. No kernel-version.full label: KMM writes none, and a
// kernel such as GKE's "6.1.90+" is no valid label value; one an earlier kmodd wrote is
// removed.
//
// Thread-safe; the same node is never reconciled by two workers at once (work_queue.h).

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "common/value.h"
#include "controller/kube/client.h"
#include "controller/kube/events.h"
#include "controller/kube_mode/node_labels.h"
#include "controller/kube_mode/writer_view.h"
#include "controller/server/status.h"

namespace kmodd::server {

// Written by kmodd before KMM fidelity (issue 11), no longer; still owned, so removed.
inline constexpr char kKernelVersionLabel[] = "kmm.node.kubernetes.io/kernel-version.full";

// KMM's label names.
std::string ReadyLabel(const std::string& ns, const std::string& name);
std::string VersionReadyLabel(const std::string& ns, const std::string& name);
// Whether kmodd sets (and so may remove) this label.
bool IsOwnedLabel(const std::string& key);
std::string DraReadyLabel(const std::string& ns, const std::string& name);
inline constexpr char kTargetSuffix[] = ".device-plugin-target";
inline constexpr char kSchedulePodPrefix[] = "beta.kmm.node.kubernetes.io/version-schedule-pod.";
// The .device-plugin-target and .dra-target labels `node` should carry (plugin_daemonset.h,
// dra_daemonset.h): not for the Modules `draining` on it, so that their plugin leaves
// before the driver changes.
Labels TargetLabels(const source::NodeMeta& node, const std::vector<api::Module>& plugins,
                    const std::set<std::string>& draining);
// version-schedule-pod.<ns>.<name>=<version> for the versioned plugin Modules the node
// reports Loaded and is not draining: which version's plugin DaemonSet may run there.
Labels SchedulePodLabels(const NodeRecord& node, const std::vector<api::Module>& plugins,
                         const std::set<std::string>& draining);
// .device-plugin-ready and .dra-ready for the Modules with a Ready Pod of that role.
Labels PodReadyLabels(const NodePluginPods& pods);

// The labels kmodd wants on a node, from its agent's last report.
Labels DesiredLabels(const NodeRecord& node);
// The merge patch taking `current`'s owned labels to `desired`; nullopt when equal.
std::optional<Value> LabelPatch(const Labels& current, const Labels& desired);

class NodeLabeler {
 public:
  // `post` runs the Event writes that follow a label write (KubeWriter: on its EventQueue,
  // so that the next node's label does not wait for them); by default, inline.
  using Post = std::function<void(std::function<void()>)>;
  NodeLabeler(kube::KubeClient& client, kube::EventRecorder& events, const Clock& clock,
              Logger& log, Post post = nullptr);

  ReconcileResult Reconcile(const WriterView& view, const std::string& node);
  // Leadership lost: what was written and refused is learnt again by the next leader.
  void Reset();

  // A write is not repeated for this long while the watch does not show it yet; after
  // that, a label someone removed or changed by hand is written again.
  static constexpr std::chrono::seconds kRecheck{30};

 private:
  struct Applied {
    Labels labels;
    Clock::Monotonic at;
  };
  void Record(const source::NodeMeta& node, const NodeEvent& e);

  kube::KubeClient& client_;
  kube::EventRecorder& events_;
  const Post post_;
  const Clock& clock_;
  Logger& log_;

  std::mutex mu_;  // never held across an API call
  std::map<std::string, Applied> applied_;  // node -> owned labels last written
  RefusedLabels refused_;
};

}  // namespace kmodd::server

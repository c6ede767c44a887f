#pragma once

// What the Kubernetes writer's duties (node_labeler.h, module_status_writer.h,
// finalizer_writer.h) read: the hub's view of the agents and of Module status, as of the
// last hub change the writer took in, and the API objects as the source watches them.
// KubeWriter serves it from one status snapshot per change; tests give a small fake.

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

#include "controller/kube_mode/kube_source.h"
#include "controller/server/plugin_pods.h"
#include "controller/server/status.h"

namespace kmodd::server {

class WriterView {
 public:
  virtual ~WriterView() = default;
  // The hub's record of a node (its agent's last report), nullopt when it has none.
  virtual std::optional<NodeRecord> Record(const std::string& node) const = 0;
  // The Node object as watched; nullopt when the API does not list it.
  virtual std::optional<source::NodeMeta> ApiNode(const std::string& node) const = 0;
  // Module "<ns>/<name>"'s aggregated status; nullopt when the hub does not list it.
  virtual std::optional<ModuleState> ModuleStatus(const std::string& key) const = 0;
  // The Module object as watched; nullopt when there is none.
  virtual std::optional<source::ModuleMeta> Module(const std::string& key) const = 0;
  // The Module in force (its last accepted version, decoded); nullopt when none is (never
  // accepted, or deleted).
  virtual std::optional<api::Module> ModuleObject(const std::string& key) const = 0;
  // The Modules in force with a spec.devicePlugin or spec.dra (their target and
  // version-schedule-pod labels).
  virtual const std::vector<api::Module>& PluginModules() const = 0;
  // The plugin Pods on a node (Hub::PluginPods); nullopt until they were first listed.
  virtual std::optional<NodePluginPods> PluginPods(const std::string& node) const = 0;
  // The Modules whose plugin must leave the node before its driver changes (Hub::Draining).
  virtual std::set<std::string> Draining(const std::string& node) const = 0;
  // Some connected agent reports the Module (any phase).
  virtual bool ReportedByConnected(const std::string& key) const = 0;
};

// What a duty's Reconcile tells the work queue (controller-runtime's Result).
struct ReconcileResult {
  static ReconcileResult Ok() { return {}; }
  static ReconcileResult RequeueAfter(std::chrono::nanoseconds d) { return {{}, d}; }
  static ReconcileResult Error(absl::Status s) { return {std::move(s), {}}; }

  absl::Status error;  // not OK: retried with the key's backoff (already logged)
  std::chrono::nanoseconds requeue_after{0};  // > 0: looked at again then
};

// Both: the first error if any (backoff), else the sooner requeue.
inline ReconcileResult Merge(const ReconcileResult& a, const ReconcileResult& b) {
  if (!a.error.ok() || !b.error.ok()) {
    return ReconcileResult::Error(!a.error.ok() ? a.error : b.error);
  }
  if (a.requeue_after.count() == 0 || b.requeue_after.count() == 0) {
    return ReconcileResult::RequeueAfter(std::max(a.requeue_after, b.requeue_after));
  }
  return ReconcileResult::RequeueAfter(std::min(a.requeue_after, b.requeue_after));
}

}  // namespace kmodd::server

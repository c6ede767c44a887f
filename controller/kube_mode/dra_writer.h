#pragma once

// The writer's DRA duty, one Module per call (key "module/<ns>/<name>"), as KMM's
// DRAReconciler does it:
//   - The DRA driver's DaemonSets (role=dra), one per Module version, kept as
//     module_daemonset_writer.h says, built by dra_daemonset.h, their build's hash in the
//     annotation kmodd.io/dra-spec.
//   - The DeviceClasses of spec.dra.deviceClasses (device_class.h), declaratively: created
//     when missing, replaced when the Module's entry changed (the hash annotation again),
//     and every DeviceClass labelled as the Module's but no longer listed deleted. A
//     DeviceClass whose name is taken by one that is not the Module's (no such labels, or
//     another Module's) is refused, never overwritten (KMM takes it over).
//   - A Module without spec.dra, being deleted or gone: all of them are deleted.
// Refusals (the API server's, a name taken, DeviceClasses not served: Kubernetes before
// 1.34) are Warning Events DraRefused on the Module, once per message for each DaemonSet
// and DeviceClass, and the key is retried with its backoff. Without access to DaemonSets
// in the namespace, or to DeviceClasses, a Module without spec.dra has none to delete.
//
// Thread-safe; the same Module is never reconciled by two workers at once.

#include <string>
#include <vector>

#include "common/log.h"
#include "controller/kube/client.h"
#include "controller/kube/events.h"
#include "controller/kube_mode/module_daemonset_writer.h"
#include "controller/kube_mode/refusal_events.h"
#include "controller/kube_mode/writer_view.h"

namespace kmodd::server {

inline constexpr char kDraSpecAnnotation[] = "kmodd.io/dra-spec";

class DraWriter {
 public:
  DraWriter(kube::KubeClient& client, kube::EventRecorder& events, Logger& log);

  ReconcileResult Reconcile(const WriterView& view, const std::string& key);
  // For a Module in force with spec.dra, its DraAccepted condition: False (reason
  // Refused, the API server's message) while the API server refuses what it writes, else
  // True.
  std::vector<Condition> Conditions(const WriterView& view, const std::string& key);
  // Leadership lost: Events are made again by the next leader.
  void Reset();

 private:
  ReconcileResult DeviceClasses(const WriterView& view, const std::string& key);
  // Creates the Module's deviceClasses[index], or replaces `current` when it changed.
  absl::Status WriteDeviceClass(const source::ModuleMeta& meta, const api::Module& m,
                                size_t index, const Value* current);
  // Deletes one DeviceClass (404 is fine).
  absl::Status DeleteDeviceClass(const std::string& key, const Value& device_class);

  kube::KubeClient& client_;
  Logger& log_;
  RefusalEvents refusals_;
  ModuleDaemonSetWriter daemon_sets_;
};

}  // namespace kmodd::server

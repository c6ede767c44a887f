#pragma once

// The writer's device plugin duty, one Module per call (key "module/<ns>/<name>"), as KMM's
// DevicePluginReconciler does it: the Module's device plugin DaemonSets, one per version,
// kept as module_daemonset_writer.h says, built by plugin_daemonset.h, their build's hash
// in the annotation kmodd.io/device-plugin-spec. They are the DaemonSets labelled
// kmm.node.kubernetes.io/module.name=<name> whose role is neither module-loader nor dra
// (KMM's own filter, so that one it made before the role label existed is found too).
// Refusals are Warning Events DevicePluginRefused on the Module, once per message.
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

inline constexpr char kDevicePluginSpecAnnotation[] = "kmodd.io/device-plugin-spec";

class DevicePluginWriter {
 public:
  DevicePluginWriter(kube::KubeClient& client, kube::EventRecorder& events, Logger& log);

  ReconcileResult Reconcile(const WriterView& view, const std::string& key);
  // For a Module in force with spec.devicePlugin, its DevicePluginAccepted condition: False (reason
  // Refused, the API server's message) while the API server refuses what it writes, else
  // True.
  std::vector<Condition> Conditions(const WriterView& view, const std::string& key);
  // Leadership lost: Events are made again by the next leader.
  void Reset();

 private:
  RefusalEvents refusals_;
  ModuleDaemonSetWriter daemon_sets_;
};

}  // namespace kmodd::server

#pragma once

// The writer's device plugin duty, one Module per call (key "module/<ns>/<name>"), as KMM's
// DevicePluginReconciler does it (handleDevicePlugin, garbageCollect,
// deleteDevicePluginDaemonSets): the Module's DaemonSets are those in its namespace labelled
// kmm.node.kubernetes.io/module.name=<name> whose role is neither module-loader nor dra
// (KMM's own filter, so that one it made before the role label existed is found too).
//   - A Module with spec.devicePlugin has one DaemonSet for its version (the
//     version-schedule-pod label; "" unversioned): created (generateName) when missing,
//     replaced (PUT over its resourceVersion) when what plugin_daemonset.h builds changed.
//     The build's hash rides in the annotation kmodd.io/device-plugin-spec, so a DaemonSet
//     is rewritten only when the Module's plugin changed, not when the API server fills in
//     defaults. A DaemonSet KMM made is adopted the same way.
//   - With a moduleLoader, a DaemonSet of another version is deleted once it schedules on
//     no node (status.desiredNumberScheduled 0), as KMM's garbage collection.
//   - A Module without spec.devicePlugin, being deleted or gone: every one is deleted.
// What the API server refuses (an invalid Pod template; no DaemonSet access in the Module's
// namespace) is logged and a Warning Event DevicePluginRefused on the Module carries its
// message, once per message; the key is retried with its backoff. A Module without a
// device plugin in a namespace kmodd may not list DaemonSets in has none to delete. The
// module's loading does not depend on any of it.
//
// Thread-safe; the same Module is never reconciled by two workers at once.

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/value.h"
#include "controller/kube/client.h"
#include "controller/kube/events.h"
#include "controller/kube_mode/writer_view.h"

namespace kmodd::server {

inline constexpr char kDevicePluginSpecAnnotation[] = "kmodd.io/device-plugin-spec";

// A stable hash of a built DaemonSet (FNV-1a over its compact JSON), as 16 hex digits.
std::string DaemonSetHash(const Value& daemon_set);

class DevicePluginWriter {
 public:
  DevicePluginWriter(kube::KubeClient& client, kube::EventRecorder& events, Logger& log);

  ReconcileResult Reconcile(const WriterView& view, const std::string& key);
  // For a Module in force with spec.devicePlugin, its DevicePluginAccepted condition: False
  // (reason Refused, the API server's message) while its DaemonSet is refused, else True.
  std::vector<Condition> Conditions(const WriterView& view, const std::string& key);
  // Leadership lost: Events are made again by the next leader.
  void Reset();

 private:
  // Deletes `daemon_sets` (404 is fine): the first other error.
  absl::Status DeleteAll(const std::vector<Value>& daemon_sets);
  void Refused(const source::ModuleMeta& meta, const std::string& message);

  kube::KubeClient& client_;
  kube::EventRecorder& events_;
  Logger& log_;
  std::mutex mu_;
  std::map<std::string, std::string> refused_;  // Module key -> the last refusal evented
  std::map<std::string, std::string> refusal_;  // Module key -> its refusal now
};

}  // namespace kmodd::server

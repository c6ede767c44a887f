#pragma once

// One Module's DaemonSets of one kind (the device plugin's, the DRA driver's), one per
// Module version, as KMM's DevicePluginReconciler and DRAReconciler both keep them
// (handleDevicePlugin / handleDRA, garbageCollect*, delete*DaemonSets):
//   - A Module that wants the kind has one DaemonSet for its version (the
//     version-schedule-pod label; "" unversioned): created (generateName) when missing,
//     replaced (PUT over its resourceVersion) when what the kind builds changed. The build's
//     hash rides in the kind's annotation, so a DaemonSet is rewritten only when the
//     Module's spec of it changed, not when the API server fills in defaults. A DaemonSet KMM
//     made is adopted the same way.
//   - With a moduleLoader, a DaemonSet of another version is deleted once it schedules on
//     no node (status.desiredNumberScheduled 0, or no status yet), as KMM's garbage
//     collection.
//   - A Module that does not want it, being deleted or gone: every one is deleted.
// The Module's DaemonSets are those in its namespace labelled
// kmm.node.kubernetes.io/module.name=<name> whose role the kind owns.
// What the API server refuses (an invalid Pod template; no DaemonSet access in the Module's
// namespace) is told through RefusalEvents (subject "daemonset"); the key is retried with
// its backoff. A Module not wanting the kind in a namespace kmodd may not list DaemonSets
// in has none to delete. The module's loading does not depend on any of it.

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/module.h"
#include "common/log.h"
#include "common/value.h"
#include "controller/kube/client.h"
#include "controller/kube_mode/refusal_events.h"
#include "controller/kube_mode/writer_view.h"

namespace kmodd::server {

// A stable hash of a built object (FNV-1a over its compact JSON), as 16 hex digits.
std::string DaemonSetHash(const Value& object);

// `built` with its hash in the annotation `annotation` (its only one).
Value WithHash(const Value& built, const std::string& annotation);

// `current` (its name, resourceVersion, uid) with `desired`'s labels and annotations on top
// of its own, and `desired`'s spec and owners (when it has some): what a PUT sends.
Value Replacing(const Value& current, const Value& desired);

// "<ns>/<name>" split; nullopt for a key without a slash.
struct ModuleKey {
  std::string ns;
  std::string name;
};
std::optional<ModuleKey> SplitModuleKey(const std::string& key);

struct DaemonSetKind {
  std::string what;        // "device plugin": in logs and Events
  std::string annotation;  // where the build's hash rides
  // Whether a DaemonSet of the Module with this role label value ("" none) is the kind's.
  std::function<bool(const std::string& role)> owns_role;
  // Whether the Module (in force, not deleting) has a spec of the kind.
  std::function<bool(const api::Module&)> wanted;
  std::function<absl::StatusOr<Value>(const api::Module&)> build;
};

class ModuleDaemonSetWriter {
 public:
  // Refusals are told on `refusals` (whose Event messages say "the <what> DaemonSet was
  // refused: ...").
  ModuleDaemonSetWriter(kube::KubeClient& client, RefusalEvents& refusals, Logger& log,
                        DaemonSetKind kind);

  ReconcileResult Reconcile(const WriterView& view, const std::string& key);

 private:
  // Deletes `daemon_sets` (404 is fine): the first other error.
  absl::Status DeleteAll(const std::vector<Value>& daemon_sets);
  // Creates `desired`, or replaces `current` with it when its hash changed.
  absl::Status Write(const std::string& key, const Value* current, const Value& desired,
                     const std::string& version);
  void Refused(const source::ModuleMeta& meta, const absl::Status& s);

  kube::KubeClient& client_;
  RefusalEvents& refusals_;
  Logger& log_;
  const DaemonSetKind kind_;
};

}  // namespace kmodd::server

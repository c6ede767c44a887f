#pragma once

// The writer's Module status duty, one Module per call (key "module/<ns>/<name>"): KMM's
// moduleLoader counters, the conditions and kmodd's per-node rows (ModuleStatusValue,
// status.h: the status document's shape), merge-patched on the status subresource only
// when it changed since this leader last wrote it; rejected Modules included
// (Accepted=False names the fields). A Warning Event on the Module for each new
// Accepted=False or PullSecretResolved=False (reasons Rejected, PullSecretNotFound,
// PullSecretWrongType, PullSecretInvalidContent, PullSecretForbidden), once per problem.
// With a ModulePolicy, an Event for each step of the rollout (reason Rollout<phase>:
// RolloutProgressing, RolloutWaitingAfterCanary, RolloutPaused, RolloutComplete,
// RolloutUndone; RolloutHalted as a Warning) and a Warning RolloutNodeFailed per node that
// failed on the revision, each once.
//
// Thread-safe; the same Module is never reconciled by two workers at once.

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/log.h"
#include "controller/kube/client.h"
#include "controller/kube/events.h"
#include "controller/kube_mode/writer_view.h"
#include "controller/server/status.h"

namespace kmodd::server {

class ModuleStatusWriter {
 public:
  ModuleStatusWriter(kube::KubeClient& client, kube::EventRecorder& events, Logger& log);

  // `extra`: conditions of the other duties (DevicePluginWriter::Conditions), after the
  // Module's own.
  ReconcileResult Reconcile(const WriterView& view, const std::string& key,
                            const std::vector<Condition>& extra = {});
  // The Module is gone (its finalizer released): a new one of that name starts afresh.
  void Forget(const std::string& key);
  // Leadership lost: everything is written and evented again by the next leader.
  void Reset();
  // Every status is written again at its next Reconcile (a resync: someone may have
  // changed it on the API server), the Events not.
  void Rewrite();

 private:
  // Records the Warning Events not yet recorded for the Module's problems.
  void WarnOnModule(const ModuleState& m, const std::string& uid);
  // An Event for each step of the Module's rollout and each node failed on it, once.
  void EventRollout(const ModuleState& m, const std::string& uid);

  kube::KubeClient& client_;
  kube::EventRecorder& events_;
  Logger& log_;

  std::mutex mu_;  // never held across an API call
  std::map<std::string, std::string> written_;           // key -> status last written (JSON)
  std::map<std::string, std::set<std::string>> warned_;  // key -> problems evented
  struct RolloutEvented {
    std::string step;               // "<revision>\n<phase>" last evented
    std::set<std::string> failed;   // "<node>: <why>" evented
  };
  std::map<std::string, RolloutEvented> rollouts_;  // key -> the rollout as evented
};

}  // namespace kmodd::server

#pragma once

// The writer's finalizer duty, one Module per call (key "module/<ns>/<name>"): kmodd's
// finalizer kmodd.io/unload goes on every Module in the plan (a Module rejected before it
// was ever accepted gets none); on deletion it is removed once no connected agent reports
// the Module any more. Disconnected nodes do not hold it up: their agents are told to
// unload it when they come back, and a node gone for good must not block the deletion.
// Patches carry the resourceVersion they were computed from: a conflict (409) is retried
// with the key's backoff, from the Module as the watch then has it.
//
// Stateless besides the API: safe from any worker.

#include <functional>
#include <string>

#include "common/log.h"
#include "common/value.h"
#include "controller/kube/client.h"
#include "controller/kube_mode/kube_source.h"
#include "controller/kube_mode/writer_view.h"

namespace kmodd::server {

inline constexpr const char* kFinalizer = source::kUnloadFinalizer;

enum class FinalizerAction { kNone, kAdd, kRemove };
// `still_reported`: some connected agent reports the Module (any phase).
FinalizerAction NextFinalizerAction(const source::ModuleMeta& m, bool still_reported);
// The merge patch setting the finalizers (with a resourceVersion precondition).
Value FinalizerPatch(const source::ModuleMeta& m, FinalizerAction action);

class FinalizerWriter {
 public:
  // `released(key)` runs after the finalizer of Module `key` was removed.
  FinalizerWriter(kube::KubeClient& client, std::function<void(const std::string&)> released,
                  Logger& log);

  ReconcileResult Reconcile(const WriterView& view, const std::string& key);

 private:
  kube::KubeClient& client_;
  const std::function<void(const std::string&)> released_;
  Logger& log_;
};

}  // namespace kmodd::server

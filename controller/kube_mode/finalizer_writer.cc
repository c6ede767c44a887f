#include "controller/kube_mode/finalizer_writer.h"

#include <utility>

namespace kmodd::server {

FinalizerAction NextFinalizerAction(const source::ModuleMeta& m, bool still_reported) {
  const bool has = m.HasUnloadFinalizer();
  if (!m.deleting) {
    // A Module never accepted has reached no node: nothing to unload, so nothing may hold
    // its deletion. One rejected after it was accepted keeps its finalizer (its last
    // accepted version is in force) and is unloaded on delete like any other.
    return has || !m.planned ? FinalizerAction::kNone : FinalizerAction::kAdd;
  }
  return has && !still_reported ? FinalizerAction::kRemove : FinalizerAction::kNone;
}

Value FinalizerPatch(const source::ModuleMeta& m, FinalizerAction action) {
  Value list = Value::EmptyList();
  for (const auto& f : m.finalizers) {
    if (f != kFinalizer) {
      list.Append(f);
    }
  }
  if (action == FinalizerAction::kAdd) {
    list.Append(kFinalizer);
  }
  // A merge patch replaces the whole list: the resourceVersion makes it apply only over
  // the list it was computed from (409 otherwise, and the retry recomputes).
  return Value(Value::Map{
      {"metadata", Value(Value::Map{{"finalizers", std::move(list)},
                                    {"resourceVersion", m.resource_version}})}});
}

FinalizerWriter::FinalizerWriter(kube::KubeClient& client,
                                 std::function<void(const std::string&)> released, Logger& log)
    : client_(client), released_(std::move(released)), log_(log) {}

ReconcileResult FinalizerWriter::Reconcile(const WriterView& view, const std::string& key) {
  const std::optional<source::ModuleMeta> m = view.Module(key);
  if (!m) {
    return ReconcileResult::Ok();
  }
  const FinalizerAction action = NextFinalizerAction(*m, view.ReportedByConnected(key));
  if (action == FinalizerAction::kNone) {
    return ReconcileResult::Ok();
  }
  absl::StatusOr<Value> r =
      client_.MergePatch(source::ModuleObjectPath(m->ns, m->name), FinalizerPatch(*m, action));
  if (!r.ok()) {
    if (absl::IsNotFound(r.status())) {
      return ReconcileResult::Ok();
    }
    if (!absl::IsAborted(r.status())) {  // a conflict is expected: the watch lags our writes
      log_.Warn("cannot update a Module's finalizers",
                {{"module", key}, {"error", r.status().ToString()}});
    }
    return ReconcileResult::Error(r.status());
  }
  if (action == FinalizerAction::kRemove) {
    if (released_) {
      released_(key);
    }
    log_.Info("Module unloaded from every connected node; finalizer removed", {{"module", key}});
  }
  return ReconcileResult::Ok();
}

}  // namespace kmodd::server

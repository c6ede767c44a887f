#include "controller/kube_mode/module_status_writer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "controller/kube_mode/kube_source.h"

namespace kmodd::server {

ModuleStatusWriter::ModuleStatusWriter(kube::KubeClient& client, kube::EventRecorder& events,
                                       Logger& log)
    : client_(client), events_(events), log_(log) {}

void ModuleStatusWriter::Forget(const std::string& key) {
  std::lock_guard lock(mu_);
  written_.erase(key);
  warned_.erase(key);
  rollouts_.erase(key);
}

void ModuleStatusWriter::Rewrite() {
  std::lock_guard lock(mu_);
  written_.clear();
}

void ModuleStatusWriter::Reset() {
  std::lock_guard lock(mu_);
  written_.clear();
  warned_.clear();
  rollouts_.clear();
}

ReconcileResult ModuleStatusWriter::Reconcile(const WriterView& view, const std::string& key,
                                              const std::vector<Condition>& extra) {
  std::optional<ModuleState> m = view.ModuleStatus(key);
  if (!m) {
    return ReconcileResult::Ok();  // not in force, not rejected: nothing to report
  }
  m->conditions.insert(m->conditions.end(), extra.begin(), extra.end());
  const Value status = ModuleStatusValue(*m);
  std::string json = ToJsonLine(status);
  {
    std::lock_guard lock(mu_);
    if (auto it = written_.find(key); it != written_.end() && it->second == json) {
      return ReconcileResult::Ok();
    }
  }
  absl::StatusOr<Value> r =
      kube::UpdateStatus(client_, source::ModuleObjectPath(m->namespace_, m->name), status);
  if (!r.ok()) {
    if (absl::IsNotFound(r.status())) {
      return ReconcileResult::Ok();  // deleted meanwhile
    }
    log_.Warn("cannot write a Module's status",
              {{"module", key}, {"error", r.status().ToString()}});
    return ReconcileResult::Error(r.status());
  }
  {
    std::lock_guard lock(mu_);
    written_[key] = std::move(json);
  }
  const std::optional<source::ModuleMeta> meta = view.Module(key);
  WarnOnModule(*m, meta ? meta->uid : "");
  EventRollout(*m, meta ? meta->uid : "");
  return ReconcileResult::Ok();
}

void ModuleStatusWriter::EventRollout(const ModuleState& m, const std::string& uid) {
  if (!m.rollout) {
    return;
  }
  const std::string key = absl::StrCat(m.namespace_, "/", m.name);
  const RolloutState& r = *m.rollout;
  RolloutEvented before;
  {
    std::lock_guard lock(mu_);
    before = rollouts_[key];
  }
  RolloutEvented now;
  now.step = absl::StrCat(r.revision, "\n", r.phase);
  now.failed.insert(r.failed_nodes.begin(), r.failed_nodes.end());
  kube::ObjectReference ref{"kmm.sigs.x-k8s.io/v1beta1", "Module", m.namespace_, m.name, uid};
  auto record = [&](const char* type, const std::string& reason, const std::string& message) {
    if (absl::Status s = events_.Record(ref, type, reason, message); !s.ok()) {
      log_.Warn("cannot record a Module event", {{"module", key}, {"error", s.ToString()}});
      return false;
    }
    return true;
  };
  // Each step of the rollout (a new revision, paused, waiting after the canaries, halted,
  // complete, undone) once, and each node that failed on it.
  if (now.step != before.step &&
      !record(r.phase == "Halted" ? kube::kEventWarning : kube::kEventNormal,
              absl::StrCat("Rollout", r.phase),
              absl::StrCat("revision ", r.revision, ": ", r.message))) {
    now.step = before.step;
  }
  for (const std::string& f : now.failed) {
    if (before.failed.count(f) == 0 &&
        !record(kube::kEventWarning, "RolloutNodeFailed", absl::StrCat("revision ", r.revision, ": ", f))) {
      now.failed.erase(f);
      break;
    }
  }
  std::lock_guard lock(mu_);
  rollouts_[key] = std::move(now);
}

void ModuleStatusWriter::WarnOnModule(const ModuleState& m, const std::string& uid) {
  const std::string key = absl::StrCat(m.namespace_, "/", m.name);
  std::set<std::string> warned;
  {
    std::lock_guard lock(mu_);
    warned = warned_[key];
  }
  // A Warning Event (what `kubectl describe module` ends with) for each problem its
  // owner must fix, once per problem, not at every status change.
  std::set<std::string> now;
  for (const Condition& c : m.conditions) {
    const bool problem =
        c.status == "False" && (c.type == "Accepted" || c.type == "PullSecretResolved");
    if (!problem) {
      continue;
    }
    const std::string reason = c.type == "Accepted" ? "Rejected" : "PullSecret" + c.reason;
    const std::string id = reason + "\n" + c.message;
    now.insert(id);
    if (warned.count(id) != 0) {
      continue;
    }
    kube::ObjectReference ref{"kmm.sigs.x-k8s.io/v1beta1", "Module", m.namespace_, m.name, uid};
    if (absl::Status s = events_.Record(ref, kube::kEventWarning, reason, c.message); !s.ok()) {
      log_.Warn("cannot record a Module event", {{"module", key}, {"error", s.ToString()}});
      now.erase(id);  // tried again at the next status write
    }
  }
  std::lock_guard lock(mu_);
  if (now.empty()) {
    warned_.erase(key);
  } else {
    warned_[key] = std::move(now);
  }
}

}  // namespace kmodd::server

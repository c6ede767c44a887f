#include "controller/kube_mode/kube_writer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/json.h"

namespace kmodd::server {

namespace {

// Writes in flight at once (label patches; then Events).
constexpr size_t kWritesInFlight = 16;

// fn(0) ... fn(n - 1), at most kWritesInFlight at a time; returns when all have.
void ParallelFor(size_t n, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < n; i = next++) {
      fn(i);
    }
  };
  std::vector<std::thread> pool;
  const size_t parallel = std::min<size_t>(kWritesInFlight, n);
  for (size_t i = 1; i < parallel; ++i) {
    pool.emplace_back(worker);
  }
  worker();
  for (auto& t : pool) {
    t.join();
  }
}

constexpr char kModulesGroupVersion[] = "kmm.sigs.x-k8s.io/v1beta1";

std::string ModulePath(const std::string& ns, const std::string& name) {
  return kube::ResourcePath(kModulesGroupVersion, "modules", ns, name);
}

}  // namespace

std::string ReadyLabel(const std::string& ns, const std::string& name) {
  return absl::StrCat(kLabelPrefix, ns, ".", name, ".ready");
}

std::string VersionReadyLabel(const std::string& ns, const std::string& name) {
  return absl::StrCat(kLabelPrefix, ns, ".", name, ".version.ready");
}

bool IsOwnedLabel(const std::string& key) {
  // <ns>.<name>.ready and <ns>.<name>.version.ready; not version-module.* (the user's),
  // not .device-plugin-ready (a device plugin's).
  return key == kKernelVersionLabel || !ModuleOfLabel(key).empty();
}

Labels DesiredLabels(const NodeRecord& node) {
  Labels out;
  for (const ReportedModule& m : node.modules) {
    if (m.phase != "Loaded") {
      continue;
    }
    const size_t slash = m.key.find('/');
    if (slash == std::string::npos) {
      continue;
    }
    const std::string ns = m.key.substr(0, slash);
    const std::string name = m.key.substr(slash + 1);
    out[ReadyLabel(ns, name)] = "";
    if (!m.version.empty()) {
      out[VersionReadyLabel(ns, name)] = m.version;
    }
  }
  return out;
}

std::optional<Value> LabelPatch(const Labels& current, const Labels& desired) {
  Value labels = Value::EmptyMap();
  bool any = false;
  for (const auto& [k, v] : current) {
    if (IsOwnedLabel(k) && desired.count(k) == 0) {
      labels.Set(k, nullptr);
      any = true;
    }
  }
  for (const auto& [k, v] : desired) {
    auto it = current.find(k);
    if (it == current.end() || it->second != v) {
      labels.Set(k, v);
      any = true;
    }
  }
  if (!any) {
    return std::nullopt;
  }
  return Value(Value::Map{{"metadata", Value(Value::Map{{"labels", std::move(labels)}})}});
}

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
  // the list it was computed from (409 otherwise, and the next pass recomputes).
  return Value(Value::Map{
      {"metadata", Value(Value::Map{{"finalizers", std::move(list)},
                                    {"resourceVersion", m.resource_version}})}});
}

KubeWriter::KubeWriter(kube::KubeClient& client, Hub& hub, source::KubeSource& source,
                       kube::EventRecorder& events, std::function<bool()> is_leader,
                       Logger& log)
    : client_(client),
      hub_(hub),
      source_(source),
      events_(events),
      is_leader_(std::move(is_leader)),
      log_(log) {}

KubeWriter::~KubeWriter() { Stop(); }

void KubeWriter::Start() {
  thread_ = std::thread([this] { Run(); });
}

void KubeWriter::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  hub_.WakeAll();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void KubeWriter::Run() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) {
        return;
      }
    }
    // A tick even without hub changes: finalizers wait on the API too, and a failed write
    // is retried.
    seen = hub_.WaitForChange(seen, std::chrono::steady_clock::now() + std::chrono::seconds(1));
    SyncOnce();
  }
}

void KubeWriter::SyncOnce() {
  const bool leader = is_leader_();
  if (!leader) {
    if (was_leader_) {
      applied_.clear();
      statuses_.clear();
      refused_.Clear();
      warned_.clear();
    }
    was_leader_ = false;
    return;
  }
  was_leader_ = true;
  if (!source_.Synced()) {
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (now - applied_since_ > kRecheck) {
    applied_.clear();
    applied_since_ = now;
  }
  const ControllerStatus st = hub_.Status();
  std::vector<PendingEvent> events = SyncLabels(st);  // first: a label is what users wait on
  SyncStatus(st);
  SyncFinalizers(st);
  // Last: as many writes as the labels, and nothing waits on them.
  ParallelFor(events.size(), [&](size_t i) { Event(events[i]); });
}

void KubeWriter::Event(const PendingEvent& e) {
  kube::ObjectReference ref{"v1", "Node", "", e.node.name, e.node.uid};
  const NodeEvent& ev = e.event;
  if (absl::Status s = events_.Record(ref, ev.type, ev.reason, ev.message, ev.annotations);
      !s.ok()) {
    log_.Warn("cannot record a Node event", {{"node", e.node.name}, {"error", s.ToString()}});
  }
}

std::vector<KubeWriter::PendingEvent> KubeWriter::SyncLabels(const ControllerStatus& st) {
  const auto now = std::chrono::steady_clock::now();
  std::vector<LabelJob> jobs;
  for (const NodeRecord& rec : st.nodes) {
    std::optional<source::NodeMeta> node = source_.Node(rec.name);
    if (!node) {
      continue;  // not a Node the API lists
    }
    if (!rec.connected && rec.modules.empty()) {
      // No report from this node to this controller yet (a new leader, a restart): its
      // agent keeps its modules loaded meanwhile, so its labels stay as they are. Removing
      // them would strip a whole fleet's .ready labels at every failover.
      continue;
    }
    Labels desired = DesiredLabels(rec);
    refused_.Filter(rec.name, desired, now);
    if (auto a = applied_.find(rec.name); a != applied_.end() && a->second == desired) {
      continue;  // patched already; the watch may not have brought it back yet
    }
    std::optional<Value> patch = LabelPatch(node->labels, desired);
    jobs.push_back(LabelJob{*std::move(node), std::move(desired), std::move(patch), {}});
  }
  // Each write is a round trip: a rollout to a thousand nodes would take a thousand of them
  // in a row. A few in flight at once.
  ParallelFor(jobs.size(), [&](size_t i) {
    LabelJob& j = jobs[i];
    if (j.patch) {
      j.write = WriteNodeLabels(client_, j.node.name, *j.patch);
    }
  });
  std::vector<PendingEvent> events;
  for (LabelJob& j : jobs) {
    Settle(j, now, events);
  }
  return events;
}

void KubeWriter::Settle(LabelJob& j, std::chrono::steady_clock::time_point now,
                        std::vector<PendingEvent>& events) {
  if (!j.write.error.ok()) {
    log_.Warn("cannot label a node", {{"node", j.node.name}, {"error", j.write.error.ToString()}});
    return;
  }
  bool retry = false;
  for (const auto& [key, error] : j.write.refused) {
    auto d = j.desired.find(key);
    if (d == j.desired.end()) {
      retry = true;  // a removal refused: nothing to leave out, so the next pass tries again
      log_.Warn("cannot remove a node label",
                {{"node", j.node.name}, {"label", key}, {"error", error}});
      continue;
    }
    if (refused_.Refused(j.node.name, key, d->second, now)) {
      log_.Warn("node label refused", {{"node", j.node.name}, {"label", key},
                                       {"value", d->second}, {"error", error}});
      events.push_back({j.node, LabelRefusedEvent(key, d->second, error)});
    }
    j.desired.erase(d);
  }
  refused_.Accepted(j.node.name, j.desired);
  if (j.patch) {
    log_.Info(j.write.refused.empty() ? "node labels updated"
                                      : "node labels updated but for the refused ones",
              {{"node", j.node.name}, {"patch", ToJsonLine(*j.patch)}});
    const Labels after = PatchedLabels(j.node.labels, *j.patch, j.write.refused);
    for (NodeEvent& e : ReadyLabelEvents(j.node.labels, after)) {
      events.push_back({j.node, std::move(e)});
    }
  }
  if (!retry) {
    applied_[j.node.name] = std::move(j.desired);
  }
}

void KubeWriter::SyncStatus(const ControllerStatus& st) {
  std::map<std::string, std::string> uids;  // Module key -> uid, for its Events
  for (const source::ModuleMeta& meta : source_.Modules()) {
    uids[meta.Key()] = meta.uid;
  }
  for (const ModuleState& m : st.modules) {
    const std::string key = absl::StrCat(m.namespace_, "/", m.name);
    const Value status = ModuleStatusValue(m);
    std::string json = ToJsonLine(status);
    if (auto it = statuses_.find(key); it != statuses_.end() && it->second == json) {
      continue;
    }
    absl::StatusOr<Value> r = kube::UpdateStatus(client_, ModulePath(m.namespace_, m.name), status);
    if (!r.ok()) {
      if (!absl::IsNotFound(r.status())) {
        log_.Warn("cannot write a Module's status",
                  {{"module", key}, {"error", r.status().ToString()}});
      }
      continue;
    }
    statuses_[key] = std::move(json);
    WarnOnModule(m, uids[key]);
  }
}

void KubeWriter::WarnOnModule(const ModuleState& m, const std::string& uid) {
  const std::string key = absl::StrCat(m.namespace_, "/", m.name);
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
    now.insert(reason + "\n" + c.message);
    if (warned_[key].count(reason + "\n" + c.message) != 0) {
      continue;
    }
    kube::ObjectReference ref{kModulesGroupVersion, "Module", m.namespace_, m.name, uid};
    if (absl::Status s = events_.Record(ref, kube::kEventWarning, reason, c.message); !s.ok()) {
      log_.Warn("cannot record a Module event", {{"module", key}, {"error", s.ToString()}});
      now.erase(reason + "\n" + c.message);  // tried again at the next status write
    }
  }
  if (now.empty()) {
    warned_.erase(key);
  } else {
    warned_[key] = std::move(now);
  }
}

void KubeWriter::SyncFinalizers(const ControllerStatus& st) {
  std::set<std::string> reported;  // Modules some connected agent still reports
  for (const NodeRecord& n : st.nodes) {
    if (!n.connected) {
      continue;
    }
    for (const ReportedModule& m : n.modules) {
      reported.insert(m.key);
    }
  }
  for (const source::ModuleMeta& m : source_.Modules()) {
    const FinalizerAction action = NextFinalizerAction(m, reported.count(m.Key()) != 0);
    if (action == FinalizerAction::kNone) {
      continue;
    }
    absl::StatusOr<Value> r =
        client_.MergePatch(ModulePath(m.ns, m.name), FinalizerPatch(m, action));
    if (!r.ok()) {
      if (!absl::IsAborted(r.status()) && !absl::IsNotFound(r.status())) {
        log_.Warn("cannot update a Module's finalizers",
                  {{"module", m.Key()}, {"error", r.status().ToString()}});
      }
      continue;
    }
    if (action == FinalizerAction::kRemove) {
      statuses_.erase(m.Key());
      warned_.erase(m.Key());
      log_.Info("Module unloaded from every connected node; finalizer removed",
                {{"module", m.Key()}});
    }
  }
}

}  // namespace kmodd::server

#include "controller/kube_mode/kube_writer.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/json.h"

namespace kmodd::server {

namespace {

constexpr char kNodeKey[] = "node/";
constexpr char kModuleKey[] = "module/";

// What the duties of a Module key read, as one string: a change means work.
std::string Fingerprint(const ModuleState* state, bool reported,
                        const source::ModuleMeta* meta) {
  std::string out = state != nullptr ? ToJsonLine(ModuleStatusValue(*state)) : "-";
  absl::StrAppend(&out, "\n", reported ? "reported" : "", "\n");
  if (meta != nullptr) {
    absl::StrAppend(&out, meta->resource_version, meta->deleting ? " deleting" : "",
                    meta->planned ? " planned" : "",
                    meta->HasUnloadFinalizer() ? " finalized" : "");
  }
  return out;
}

}  // namespace

// The hub as of one change, and the source as it is.
struct KubeWriter::Snapshot final : WriterView {
  std::set<std::string> nodes;  // the nodes the hub had records of
  std::map<std::string, ModuleState> modules;
  std::set<std::string> reported;  // Modules some connected agent reports
  std::vector<api::Module> plugin_modules;  // in force, with a device plugin or DRA driver
  source::KubeSource* source = nullptr;
  Hub* hub = nullptr;

  // As the hub has it now: a node's key may be queued before the next snapshot.
  std::optional<NodeRecord> Record(const std::string& node) const override {
    return hub->Node(node);
  }
  std::optional<source::NodeMeta> ApiNode(const std::string& node) const override {
    return source->Node(node);
  }
  std::optional<ModuleState> ModuleStatus(const std::string& key) const override {
    auto it = modules.find(key);
    return it == modules.end() ? std::nullopt : std::optional(it->second);
  }
  std::optional<source::ModuleMeta> Module(const std::string& key) const override {
    return source->Module(key);
  }
  std::optional<api::Module> ModuleObject(const std::string& key) const override {
    return hub->ModuleObject(key);
  }
  const std::vector<api::Module>& PluginModules() const override { return plugin_modules; }
  std::optional<NodePluginPods> PluginPods(const std::string& node) const override {
    return hub->PluginPods(node);
  }
  std::set<std::string> Draining(const std::string& node) const override {
    return hub->Draining(node);
  }
  bool ReportedByConnected(const std::string& key) const override {
    return reported.count(key) != 0;
  }
};

KubeWriter::KubeWriter(kube::KubeClient& client, Hub& hub, source::KubeSource& source,
                       kube::EventRecorder& events, std::function<bool()> is_leader,
                       const Clock& clock, Logger& log, KubeWriterOptions options)
    : hub_(hub),
      source_(source),
      is_leader_(std::move(is_leader)),
      clock_(clock),
      log_(log),
      options_(options),
      labeler_(client, events, clock, log,
               [this](std::function<void()> job) { events_.Post(std::move(job)); }),
      status_(client, events, log),
      finalizers_(client, [this](const std::string& key) { status_.Forget(key); }, log),
      device_plugins_(client, events, log),
      dra_(client, events, log),
      queue_(clock, options.queue),
      events_(log) {}

KubeWriter::~KubeWriter() { Stop(); }

void KubeWriter::Start() {
  events_.Start();
  watcher_ = std::thread([this] { Watch(); });
  for (size_t i = 0; i < std::max<size_t>(options_.workers, 1); ++i) {
    workers_.emplace_back([this] { Work(); });
  }
}

void KubeWriter::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  hub_.WakeAll();
  queue_.ShutDown();
  if (watcher_.joinable()) {
    watcher_.join();
  }
  for (std::thread& t : workers_) {
    t.join();
  }
  workers_.clear();
  events_.Stop();  // the Events the workers posted are written first
}

bool KubeWriter::stopping() {
  std::lock_guard lock(mu_);
  return stopping_;
}

std::shared_ptr<const KubeWriter::Snapshot> KubeWriter::snapshot() {
  std::lock_guard lock(mu_);
  return snapshot_;
}

void KubeWriter::Watch() {
  uint64_t seen = 0;
  Clock::Monotonic next_resync = clock_.MonotonicNow() + options_.resync;
  Clock::Monotonic next_snapshot = clock_.MonotonicNow();
  HubChanges pending;  // taken in since the last snapshot, not yet in one
  bool pending_any = false;
  while (!stopping()) {
    Clock::Monotonic deadline = next_resync;
    if (!leading_ || owed_.load()) {
      deadline = std::min(deadline, clock_.MonotonicNow() + options_.recheck);
    }
    if (pending_any) {
      deadline = std::min(deadline, next_snapshot);
    }
    // The hub waits on its own clock, the one this writer is given too (run_cmd passes one
    // clock to both; so do the tests).
    HubChanges changes = hub_.WaitForChanges(
        seen, std::max(deadline - clock_.MonotonicNow(), Clock::Monotonic::duration::zero()));
    if (stopping()) {
      return;
    }
    if (changes.number != seen) {
      pending_any = true;
      pending.all = pending.all || changes.all;
      pending.nodes.merge(changes.nodes);
    }
    seen = changes.number;
    pending.number = seen;
    const Clock::Monotonic now = clock_.MonotonicNow();
    const bool resync = now >= next_resync;
    if (resync) {
      next_resync = now + options_.resync;
    }
    if (!resync && pending_any && now < next_snapshot && !pending.all && leading_ &&
        !owed_.load()) {
      // Too soon for another snapshot: the nodes now, the Modules at next_snapshot.
      for (const std::string& name : pending.nodes) {
        queue_.Add(kNodeKey + name);
      }
      pending.nodes.clear();
      continue;
    }
    TakeIn(pending, resync);
    pending = HubChanges{};
    pending_any = false;
    next_snapshot = now + options_.snapshot_interval;
  }
}

void KubeWriter::TakeIn(const HubChanges& c, bool everything) {
  if (!is_leader_()) {
    if (leading_) {
      labeler_.Reset();
      status_.Reset();
      device_plugins_.Reset();
      dra_.Reset();
      fingerprints_.clear();
      log_.Info("not leading: the writer writes nothing until it leads again");
    }
    leading_ = false;
    return;
  }
  if (!source_.Synced()) {
    return;  // every key once it is
  }
  if (everything) {
    // A status changed on the API server by someone else is not announced: the resync
    // writes every status again.
    status_.Rewrite();
  }
  everything = everything || !leading_ || c.all || owed_.exchange(false);
  leading_ = true;

  const ControllerStatus st = hub_.Status();
  auto snap = std::make_shared<Snapshot>();
  snap->source = &source_;
  snap->hub = &hub_;
  for (const NodeRecord& n : st.nodes) {
    if (n.connected) {
      for (const ReportedModule& m : n.modules) {
        snap->reported.insert(m.key);
      }
    }
    snap->nodes.insert(n.name);
  }
  for (const ModuleState& m : st.modules) {
    snap->modules.emplace(absl::StrCat(m.namespace_, "/", m.name), m);
  }
  snap->plugin_modules = hub_.PluginModules();
  // What decides the nodes' target and version-schedule-pod labels: when it changes, every
  // node.
  std::string targeting;
  for (const api::Module& m : snap->plugin_modules) {
    absl::StrAppend(&targeting, m.Key(), " ", m.spec.device_plugin.has_value(),
                    m.spec.dra.has_value(), " ",
                    m.spec.module_loader ? m.spec.module_loader->container.version : "", "\n");
    for (const auto& [k, v] : m.spec.selector) {
      absl::StrAppend(&targeting, k, "=", v, ",");
    }
    for (const api::Toleration& t : m.spec.tolerations) {
      absl::StrAppend(&targeting, t.key, " ", t.op, " ", t.value, " ", t.effect, ";");
    }
    absl::StrAppend(&targeting, "\n");
  }
  const bool targets_changed = targeting != targeting_;

  targeting_ = std::move(targeting);
  std::map<std::string, std::string> fingerprints;
  for (const auto& [key, m] : snap->modules) {
    const std::optional<source::ModuleMeta> meta = source_.Module(key);
    fingerprints[key] = Fingerprint(&m, snap->reported.count(key) != 0, meta ? &*meta : nullptr);
  }
  for (const source::ModuleMeta& meta : source_.Modules()) {
    if (snap->modules.count(meta.Key()) == 0) {
      fingerprints[meta.Key()] =
          Fingerprint(nullptr, snap->reported.count(meta.Key()) != 0, &meta);
    }
  }
  {
    std::lock_guard lock(mu_);
    snapshot_ = snap;  // before the keys: a worker reads at least this change
  }

  std::vector<std::string> keys;
  if (everything || targets_changed) {
    for (const std::string& name : snap->nodes) {
      keys.push_back(kNodeKey + name);
    }
  } else {
    for (const std::string& name : c.nodes) {
      keys.push_back(kNodeKey + name);
    }
  }
  for (const auto& [key, fingerprint] : fingerprints_) {
    if (fingerprints.count(key) == 0) {
      keys.push_back(kModuleKey + key);  // gone: its duties clean up after it
    }
  }
  for (const auto& [key, fingerprint] : fingerprints) {
    auto it = fingerprints_.find(key);
    if (everything || it == fingerprints_.end() || it->second != fingerprint) {
      keys.push_back(kModuleKey + key);
    }
  }
  fingerprints_ = std::move(fingerprints);
  // Nodes first: a label is what users wait on.
  for (const std::string& key : keys) {
    queue_.Add(key);
  }
}

void KubeWriter::Work() {
  while (std::optional<std::string> key = queue_.Get()) {
    Process(*key);
    queue_.Done(*key);
  }
}

void KubeWriter::Process(const std::string& key) {
  const std::shared_ptr<const Snapshot> snap = snapshot();
  if (!is_leader_() || snap == nullptr) {
    owed_ = true;  // every key again once leading
    queue_.Forget(key);
    return;
  }
  ReconcileResult r;
  if (absl::StartsWith(key, kNodeKey)) {
    r = labeler_.Reconcile(*snap, key.substr(sizeof(kNodeKey) - 1));
  } else if (absl::StartsWith(key, kModuleKey)) {
    const std::string module = key.substr(sizeof(kModuleKey) - 1);
    // The finalizer first: its patch carries the resourceVersion the watch last brought,
    // which a status write just before would replace (a certain conflict, and a retry).
    r = finalizers_.Reconcile(*snap, module);
    // The DaemonSets before the status, which says whether the API server took them.
    const ReconcileResult plugin = device_plugins_.Reconcile(*snap, module);
    const ReconcileResult dra = dra_.Reconcile(*snap, module);
    std::vector<Condition> conditions = device_plugins_.Conditions(*snap, module);
    for (Condition& c : dra_.Conditions(*snap, module)) {
      conditions.push_back(std::move(c));
    }
    r = Merge(r, status_.Reconcile(*snap, module, conditions));
    r = Merge(r, plugin);
    r = Merge(r, dra);
  }
  if (!r.error.ok()) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    queue_.AddRateLimited(key);  // the duty logged it
    return;
  }
  queue_.Forget(key);
  if (r.requeue_after.count() > 0) {
    queue_.AddAfter(key, r.requeue_after);
  }
}

void KubeWriter::SyncOnce() {
  TakeIn(HubChanges{0, true, {}}, true);
  while (std::optional<std::string> key = queue_.TryGet()) {
    Process(*key);
    queue_.Done(*key);
  }
}

}  // namespace kmodd::server

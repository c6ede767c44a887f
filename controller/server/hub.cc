#include "controller/server/hub.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/message_differencer.h"
#include "controller/server/report_filter.h"
#include "controller/server/wire.h"

namespace kmodd::server {

namespace {

// A node reconnecting in a loop logs at most this often.
constexpr int64_t kMinLogGapMs = 60'000;

}  // namespace

Hub::Hub(HubOptions options, const Clock& clock, Logger& log)
    : options_(std::move(options)), clock_(clock), log_(log) {
  started_ms_ = NowMs();
  if (options_.rollout_batch.count() > 0) {
    rollout_thread_ = std::thread([this] { RunRollouts(); });
  }
}

Hub::~Hub() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  rollout_cv_.notify_all();
  if (rollout_thread_.joinable()) {
    rollout_thread_.join();
  }
}

int64_t Hub::NowMs() const { return absl::ToUnixMillis(clock_.Now()); }

void Hub::JournalLocked(const std::string& node) {
  // Numbered as the change about to be made: a reader that saw the one before gets it.
  journal_.emplace_back(changes_ + 1, node);
  if (journal_.size() > kJournal) {
    journal_floor_ = journal_.front().first;
    journal_.pop_front();
  }
}

void Hub::ChangedLocked(const std::string& node) {
  if (!node.empty()) {
    JournalLocked(node);
  }
  ++changes_;
  changed_cv_.notify_all();
}

void Hub::PushLocked(const std::string& name, Entry& e) {
  if (e.stale || !e.desired) {
    auto d = std::make_shared<v1::NodeDesired>(PlannedLocked(name, e));
    const uint64_t seq = ++seq_;
    d->set_version(absl::StrCat(options_.run_id, "-", seq));
    if (!rollouts_.empty()) {
      ApplyRolloutsLocked(name, e, e.desired.get(), *d, seq);
    }
    const std::set<std::string> held_before = e.holding;
    if (e.desired) {
      HoldForPluginPodsLocked(name, e, *e.desired, *d);
    } else {
      e.holding.clear();
    }
    if (!e.holding.empty() || e.holding != held_before) {
      JournalLocked(name);  // its target labels follow (Draining)
    }
    for (const v1::ModuleSpec& m : d->modules()) {
      if (m.image_repo_secret().empty()) {
        continue;
      }
      const std::string key = absl::StrCat(m.namespace_(), "/", m.image_repo_secret());
      if (auto it = pull_secrets_.find(key); it != pull_secrets_.end()) {
        (*d->mutable_pull_secrets())[key] = it->second;
      }
    }
    for (const auto& m : d->modules()) {
      e.sent_keys.insert(absl::StrCat(m.namespace_(), "/", m.name()));
    }
    e.desired = std::move(d);
    e.stale = false;
  }
  e.record.pushed_version = e.desired->version();
  e.sent = true;
  e.stream->Push(e.desired);
  ++counters_.pushes;
  e.push_ms = NowMs();
  e.push_version = e.desired->version();
  if (!rollouts_.empty()) {
    NodeRolloutChangedLocked(name, e);  // sent the revision: Updating
  }
}

namespace {

std::string SpecKey(const v1::ModuleSpec& m) { return absl::StrCat(m.namespace_(), "/", m.name()); }

}  // namespace

void Hub::HoldForPluginPodsLocked(const std::string& name, Entry& e,
                                  const v1::NodeDesired& before, v1::NodeDesired& next) {
  std::set<std::string> holding;
  auto pods = plugin_pods_.find(name);
  if (pods != plugin_pods_.end()) {
    for (const v1::ModuleSpec& old : before.modules()) {
      const std::string key = SpecKey(old);
      if (pods->second.count(key) == 0) {
        continue;
      }
      auto* modules = next.mutable_modules();
      auto same = std::find_if(modules->begin(), modules->end(),
                               [&](const v1::ModuleSpec& m) { return SpecKey(m) == key; });
      if (same != modules->end() && SameDriverEntry(old, *same)) {
        continue;  // the same driver (new readiness checks, if any, go as planned)
      }
      if (same != modules->end()) {
        *same = old;
      } else {
        *next.add_modules() = old;
      }
      holding.insert(key);
      const std::string& secret = old.image_repo_secret();
      const std::string secret_key = absl::StrCat(old.namespace_(), "/", secret);
      if (auto it = pull_secrets_.find(secret_key); !secret.empty() && it != pull_secrets_.end()) {
        (*next.mutable_pull_secrets())[secret_key] = it->second;
      }
    }
    std::sort(next.mutable_modules()->begin(), next.mutable_modules()->end(),
              [](const v1::ModuleSpec& a, const v1::ModuleSpec& b) { return SpecKey(a) < SpecKey(b); });
  }
  for (const std::string& key : holding) {
    if (e.holding.count(key) == 0) {
      log_.Info("module kept on the node while its plugin Pod is there",
                {{"node", name}, {"module", key}});
    }
  }
  for (const std::string& key : e.holding) {
    if (holding.count(key) == 0) {
      log_.Info("plugin Pod gone: the node is sent the module's plan", {{"node", name}, {"module", key}});
    }
  }
  e.holding = std::move(holding);
}

void Hub::PluginPodsChangedLocked(const std::string& node, const NodePluginPods& before,
                                  const NodePluginPods& after) {
  if (before == after) {
    return;
  }
  // A new Pod holds nothing by itself (what the node runs is what it was sent); a Pod gone
  // may release a hold.
  auto it = nodes_.find(node);
  if (it != nodes_.end() &&
      std::any_of(it->second.holding.begin(), it->second.holding.end(),
                  [&](const std::string& key) { return after.count(key) == 0; })) {
    (void)PushChangedLocked({node});
  } else if (it != nodes_.end() && !it->second.sent && PushableLocked(it->second)) {
    // Its first desired state waited for the plugin to go (WaitsForPluginLocked).
    log_.Info("plugin Pod gone: the node is sent its first desired state", {{"node", node}});
    PushLocked(node, it->second);
  }
  JournalLocked(node);
}

void Hub::SetAllPluginPods(std::map<std::string, NodePluginPods> by_node) {
  std::lock_guard lock(mu_);
  static const NodePluginPods kNone;
  std::set<std::string> nodes;
  for (const auto& [n, pods] : plugin_pods_) {
    nodes.insert(n);
  }
  for (const auto& [n, pods] : by_node) {
    nodes.insert(n);
  }
  std::map<std::string, NodePluginPods> before = std::exchange(plugin_pods_, std::move(by_node));
  for (auto it = plugin_pods_.begin(); it != plugin_pods_.end();) {
    it = it->second.empty() ? plugin_pods_.erase(it) : std::next(it);
  }
  for (const std::string& n : nodes) {
    auto b = before.find(n);
    auto a = plugin_pods_.find(n);
    PluginPodsChangedLocked(n, b == before.end() ? kNone : b->second,
                            a == plugin_pods_.end() ? kNone : a->second);
  }
  const bool first = !plugin_pods_synced_;
  plugin_pods_synced_ = true;
  if (first) {
    (void)PushOwedLocked();  // the nodes that waited for the first list
  }
  ChangedLocked();
}

void Hub::SetPluginPods(const std::string& node, const NodePluginPods& pods) {
  std::lock_guard lock(mu_);
  NodePluginPods before;
  if (auto it = plugin_pods_.find(node); it != plugin_pods_.end()) {
    before = std::move(it->second);
    plugin_pods_.erase(it);
  }
  if (!pods.empty()) {
    plugin_pods_[node] = pods;
  }
  if (before == pods) {
    return;
  }
  PluginPodsChangedLocked(node, before, pods);
  ChangedLocked();
}

std::optional<NodePluginPods> Hub::PluginPods(const std::string& node) {
  std::lock_guard lock(mu_);
  if (!plugin_pods_synced_) {
    return std::nullopt;
  }
  auto it = plugin_pods_.find(node);
  return it == plugin_pods_.end() ? NodePluginPods{} : it->second;
}

std::set<std::string> Hub::Draining(const std::string& node) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node);
  return it == nodes_.end() ? std::set<std::string>{} : DrainingLocked(node, it->second);
}

namespace {

const ReportedModule* FindReported(const std::vector<ReportedModule>& reported,
                                   const std::string& key) {
  auto rm = std::lower_bound(reported.begin(), reported.end(), key,
                             [](const ReportedModule& r, const std::string& k) { return r.key < k; });
  return rm == reported.end() || rm->key != key ? nullptr : &*rm;
}

// Whether the node's report of a Module differs from its planned config (another image or
// version). An agent that does not say which image it runs (none of ours) is taken at its
// word.
bool Differs(const ReportedModule& rm, const placement::ResolvedConfig& planned) {
  return (!rm.image.empty() && rm.image != planned.container_image) ||
         rm.version != planned.version;
}

}  // namespace

std::set<std::string> Hub::DrainingLocked(const std::string& node, const Entry& e) const {
  std::set<std::string> out = e.holding;
  std::optional<placement::NodePlacement> p = placer_.PlacementFor(node);
  if (!p) {
    return out;
  }
  for (const placement::DesiredModule& dm : p->modules) {
    const api::Module& m = *dm.module;
    if (!m.spec.device_plugin.has_value() && !m.spec.dra.has_value()) {
      continue;
    }
    // Not there yet: its .ready label gates the plugin.
    if (const ReportedModule* rm = FindReported(e.record.modules, m.Key());
        rm != nullptr && Differs(*rm, *dm.config)) {
      out.insert(m.Key());
    }
  }
  return out;
}

bool Hub::WaitsForPluginLocked(const Entry& e) const {
  if (!options_.wait_for_plugin_pods || e.desired) {
    return false;  // what this run sent is what a plugin holds it at (HoldForPluginPodsLocked)
  }
  if (!plugin_pods_synced_) {
    return true;
  }
  auto pods = plugin_pods_.find(e.record.name);
  if (pods == plugin_pods_.end()) {
    return false;
  }
  if (!e.reported) {
    return true;  // what it runs is not known yet
  }
  std::optional<placement::NodePlacement> p = placer_.PlacementFor(e.record.name);
  for (const auto& [key, unused] : pods->second) {
    const ReportedModule* rm = FindReported(e.record.modules, key);
    if (rm == nullptr) {
      continue;
    }
    const placement::DesiredModule* dm = nullptr;
    if (p) {
      for (const placement::DesiredModule& d : p->modules) {
        if (d.module->Key() == key) {
          dm = &d;
        }
      }
    }
    if (dm == nullptr || Differs(*rm, *dm->config)) {
      return true;  // its first desired state would unload or swap it under the plugin
    }
  }
  return false;
}

size_t Hub::PushOwedLocked() {
  size_t pushed = 0;
  for (auto& [name, e] : nodes_) {
    if ((!e.sent || e.stale) && PushableLocked(e)) {
      PushLocked(name, e);
      ++pushed;
    }
  }
  return pushed;
}

size_t Hub::PushChangedLocked(const std::vector<std::string>& nodes) {
  size_t pushed = 0;
  for (const auto& name : nodes) {
    auto it = nodes_.find(name);
    if (it == nodes_.end()) {
      continue;
    }
    it->second.stale = true;
    it->second.planned_stale = true;
    if (PushableLocked(it->second)) {
      PushLocked(name, it->second);
      ++pushed;
    }
  }
  return pushed;
}

void Hub::SetNodeLocked(Entry& e, api::Node node) {
  if (e.desired && node == e.node) {
    return;
  }
  e.node = node;
  const std::string name = node.metadata.name;
  for (const auto& changed : placer_.SetNode(std::move(node))) {
    if (changed == name) {
      e.stale = true;
      e.planned_stale = true;
    }
  }
}

void Hub::UpdateInheritedLocked(const source::SourceUpdate& update) {
  finalized_ = update.finalized;
  if (active_) {
    // Planned by this run before it had the finalizer: the writer puts ours on it, and
    // this run knows every node it sends it to.
    for (const auto& c : update.changes) {
      for (const auto& m : c.set) {
        if (finalized_.count(m.Key()) == 0) {
          ours_.insert(m.Key());
        }
      }
    }
  }
  for (auto it = ours_.begin(); it != ours_.end();) {
    it = modules_.count(*it) == 0 && finalized_.count(*it) == 0 ? ours_.erase(it) : std::next(it);
  }
  inherited_ = held_;
  std::set_difference(finalized_.begin(), finalized_.end(), ours_.begin(), ours_.end(),
                      std::inserter(inherited_, inherited_.end()));
}

void Hub::ApplySource(const source::SourceUpdate& update) {
  std::lock_guard lock(mu_);
  std::vector<std::string> changed;
  auto add = [&changed](std::vector<std::string> names) {
    changed.insert(changed.end(), names.begin(), names.end());
  };
  for (const auto& c : update.changes) {
    for (const auto& key : c.removed) {
      modules_.erase(key);
      add(placer_.RemoveModule(key));
    }
    for (const auto& m : c.set) {
      modules_.insert_or_assign(m.Key(), m);
      add(placer_.SetModule(m));
    }
  }
  if (update.policies && SetPoliciesLocked(*update.policies)) {
    for (const std::string& name : NodeNamesLocked()) {
      changed.push_back(name);  // every entry carries the checks
    }
  }
  for (const std::string& name : changed) {
    if (auto it = nodes_.find(name); it != nodes_.end()) {
      it->second.planned_stale = true;
    }
  }
  if (!update.changes.empty()) {
    for (auto& [key, r] : rollouts_) {
      r.dirty = true;  // a new revision, or new nodes for it
      r.full = true;
    }
  }
  std::vector<std::string> gated = PlanRolloutsLocked();
  changed.insert(changed.end(), gated.begin(), gated.end());
  std::sort(changed.begin(), changed.end());
  changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
  errors_ = update.errors;
  held_ = update.held;
  UpdateInheritedLocked(update);
  if (!source_seen_) {
    source_seen_ = true;
    // What nodes reported while nothing could be checked, checked now: before any push,
    // since whether a node is held depends on what it runs.
    for (auto& [name, e] : nodes_) {
      if (e.unfiltered) {
        std::vector<ReportedModule> modules = *std::move(e.unfiltered);
        e.unfiltered.reset();
        (void)TakeModulesLocked(name, e, std::move(modules), 0, "");
        e.record.reported = e.reported && e.stream != nullptr;
        JournalLocked(name);
      }
    }
  }
  if (!serving_ && (errors_.empty() || !update.errors_hold_all)) {
    serving_ = true;
  } else if (!serving_) {
    log_.Warn("Module manifests rejected before any were accepted: no desired state is sent "
              "until they are fixed, agents keep what they run",
              {{"errors", static_cast<int64_t>(errors_.size())}});
  }
  // Then the nodes connected while nothing was sent, or held, that may be served now.
  const size_t pushed = PushChangedLocked(changed) + PushOwedLocked();
  if (!changed.empty() || pushed > 0) {
    log_.Info("desired state changed", {{"nodes", static_cast<int64_t>(changed.size())},
                                        {"pushed", static_cast<int64_t>(pushed)}});
  }
  ChangedLocked();
}

absl::Status Hub::Hello(AgentStream* stream, const v1::NodeInfo& info) {
  if (info.name().empty()) {
    return absl::InvalidArgumentError(
        "the first report of a stream must carry node.name (the hello)");
  }
  if (absl::Status st = CheckNodeInfo(info, options_.limits); !st.ok()) {
    return st;
  }
  std::optional<api::Node> node;
  if (!options_.nodes_from_api) {
    node = NodeFromInfo(info, options_.limits);  // a map of up to max_labels: not under mu_
  }
  std::lock_guard lock(mu_);
  if (!active_) {
    return absl::UnavailableError(
        "this controller replica is not the leader; reconnect to reach the leader");
  }
  const std::string& name = info.name();
  Entry& e = nodes_[name];
  if (e.stream != nullptr && e.stream != stream) {
    streams_.erase(e.stream);
    e.stream->Close(absl::AbortedError("replaced by a newer stream from the same node"));
    log_.Info("agent stream replaced by a newer one", {{"node", name}});
  }
  e.stream = stream;
  e.sent = false;
  e.reported = false;
  e.logged_this_stream = false;
  streams_[stream] = name;
  e.record.name = name;
  e.record.connected = true;
  e.record.since_unix_ms = NowMs();
  e.record.kernel_release = Truncated(info.kernel_release(), options_.limits.max_text);
  e.record.boot_id = Truncated(info.boot_id(), options_.limits.max_text);
  e.record.agent_version = Truncated(info.agent_version(), options_.limits.max_text);
  e.record.ignored_modules = 0;
  e.record.reported = false;
  if (node) {
    SetNodeLocked(e, *std::move(node));
  } else if (!e.from_api) {
    log_.Warn("agent connected for a node the API does not list; it is sent nothing",
              {{"node", name}});
  }
  if (!rollouts_.empty()) {
    NodeRolloutChangedLocked(name, e);
    for (auto& [key, r] : rollouts_) {
      r.dirty = true;  // connected: it may take its turn
    }
    RolloutsChangedLocked();
  }
  if (PushableLocked(e) && !e.sent) {
    PushLocked(name, e);
  }
  log_.Info("agent connected", {{"node", name},
                                {"kernel", info.kernel_release()},
                                {"version", e.record.pushed_version},
                                {"modules", e.desired ? e.desired->modules_size() : 0}});
  ChangedLocked(name);
  return absl::OkStatus();
}

absl::Status Hub::Report(AgentStream* stream, const v1::NodeReport& report) {
  const ReportLimits& limits = options_.limits;
  // Outside the lock: the checks, conversions and the sort, whose cost grows with the
  // report. Nothing here reads the hub's state.
  absl::Status refused = report.has_node() ? CheckNodeInfo(report.node(), limits)
                                           : absl::OkStatus();
  absl::StatusOr<ReportedModules> checked =
      refused.ok() ? ReportedFromProto(report.modules(), limits)
                   : absl::StatusOr<ReportedModules>(refused);
  std::optional<api::Node> node;
  if (checked.ok() && report.has_node() && !options_.nodes_from_api) {
    node = NodeFromInfo(report.node(), limits);
  }
  std::vector<ReportedModule> replaced;  // freed after the lock is released

  std::lock_guard lock(mu_);
  auto s = streams_.find(stream);
  if (s == streams_.end()) {
    return absl::AbortedError("this stream was replaced or has not said hello");
  }
  const std::string& name = s->second;
  Entry& e = nodes_.at(name);
  if (report.has_node() && report.node().name() != name) {
    return absl::PermissionDeniedError(absl::StrCat("this stream is node ", name,
                                                    "'s; it cannot report as ",
                                                    Truncated(report.node().name(), 253)));
  }
  if (!checked.ok()) {
    ++counters_.reports_refused;
    if (MayLogLocked(e)) {
      log_.Warn("agent report refused: over the limits of one report; its stream ends",
                {{"node", name}, {"error", std::string(checked.status().message())}});
    }
    return checked.status();
  }
  if (report.has_node()) {
    e.record.kernel_release = Truncated(report.node().kernel_release(), limits.max_text);
    e.record.boot_id = Truncated(report.node().boot_id(), limits.max_text);
    e.record.agent_version = Truncated(report.node().agent_version(), limits.max_text);
    if (node) {
      SetNodeLocked(e, *std::move(node));
    }
  }
  ++counters_.reports;
  if (report.has_ack()) {
    const v1::Ack& ack = report.ack();
    if (e.push_ms > 0 && ack.version() == e.push_version) {
      const double seconds = static_cast<double>(NowMs() - e.push_ms) / 1000;
      const std::vector<double>& bounds = AckBounds();
      counters_.ack_counts.resize(bounds.size());
      for (size_t i = 0; i < bounds.size(); ++i) {
        if (seconds <= bounds[i]) {
          ++counters_.ack_counts[i];
          break;
        }
      }
      ++counters_.ack_count;
      counters_.ack_sum += seconds;
      e.push_ms = 0;
    }
    if (ack.accepted()) {
      e.record.acked_version = Truncated(ack.version(), limits.max_text);
    } else {
      e.record.nacked_version = Truncated(ack.version(), limits.max_text);
      e.record.nack_error = Truncated(ack.error(), limits.max_text);
      log_.Warn("agent refused a desired state; it keeps the previous one",
                {{"node", name}, {"version", e.record.nacked_version},
                 {"error", e.record.nack_error}});
    }
  }
  // Every report, ACKs included, carries the agent's full observed state.
  const size_t left_out = checked->bad_names + checked->repeated;
  if (source_seen_) {
    replaced = TakeModulesLocked(name, e, std::move(checked->modules), left_out,
                                 checked->first_bad_name);
  } else {
    e.unfiltered = std::move(checked->modules);
    e.record.ignored_modules += left_out;
  }
  e.reported = true;
  e.record.reported = source_seen_;  // before, its modules wait in `unfiltered`
  if (!report.applied_version().empty()) {
    e.record.applied_version = Truncated(report.applied_version(), limits.max_text);
  }
  if (!rollouts_.empty() && source_seen_) {
    NodeRolloutChangedLocked(name, e);
    RolloutsChangedLocked();
  }
  // A hello's new labels, or a node no longer held now that it said what it runs.
  if ((e.stale || !e.sent) && PushableLocked(e)) {
    PushLocked(name, e);
  }
  ChangedLocked(name);
  return absl::OkStatus();
}

std::vector<ReportedModule> Hub::TakeModulesLocked(const std::string& name, Entry& e,
                                                   std::vector<ReportedModule> modules,
                                                   size_t ignored, const std::string& example) {
  ReportScope scope;
  scope.sent = &e.sent_keys;
  scope.last = &e.record.modules;
  scope.inherited = &inherited_;
  scope.planned = [&] {
    std::vector<std::string> keys;
    if (std::optional<placement::NodePlacement> p = placer_.PlacementFor(name)) {
      keys.reserve(p->modules.size());
      for (const auto& dm : p->modules) {
        keys.push_back(dm.module->Key());
      }
    }
    std::sort(keys.begin(), keys.end());
    return keys;
  };
  FilteredReport f = FilterReport(std::move(modules), scope);
  for (const PhaseChange& c : PhaseChanges(e.record.modules, f.accepted)) {
    // Debug: the timeline of one module on one node (benchmarks and system tests read it).
    log_.Debug("module phase", {{"node", name},
                                {"module", std::string(c.key)},
                                {"phase", std::string(c.phase)},
                                {"version", std::string(c.version)},
                                {"image", std::string(c.image)}});
  }
  std::vector<ReportedModule> replaced = std::exchange(e.record.modules, std::move(f.accepted));
  ignored += f.ignored;
  if (ignored == 0) {
    return replaced;
  }
  e.record.ignored_modules += ignored;
  e.unlogged += ignored;
  if (!MayLogLocked(e)) {
    return replaced;
  }
  std::vector<std::string> examples = std::move(f.examples);
  if (!example.empty()) {
    examples.push_back(absl::StrCat(example, " (not a valid name)"));
  }
  log_.Warn("agent reported modules that are not its node's: ignored (no status, label or "
            "finalizer comes of them)",
            {{"node", name},
             {"ignored", static_cast<int64_t>(e.unlogged)},
             {"ignoredThisStream", static_cast<int64_t>(e.record.ignored_modules)},
             {"examples", absl::StrJoin(examples, ", ")}});
  e.unlogged = 0;
  e.logged_this_stream = true;
  return replaced;
}

bool Hub::MayLogLocked(Entry& e) {
  const int64_t now = NowMs();
  const int64_t gap = e.logged_this_stream ? options_.log_every.count() : kMinLogGapMs;
  if (e.logged_unix_ms != 0 && now - e.logged_unix_ms < gap) {
    return false;
  }
  e.logged_unix_ms = now;
  return true;
}

void Hub::Goodbye(AgentStream* stream) {
  std::lock_guard lock(mu_);
  auto s = streams_.find(stream);
  if (s == streams_.end()) {
    return;  // replaced, or never said hello
  }
  Entry& e = nodes_.at(s->second);
  e.stream = nullptr;
  e.record.connected = false;
  e.record.since_unix_ms = NowMs();
  log_.Info("agent disconnected; its node keeps its plan", {{"node", s->second}});
  const std::string name = s->second;
  streams_.erase(s);
  if (!rollouts_.empty()) {
    for (auto& [key, r] : rollouts_) {
      r.dirty = true;  // its place among the nodes updating at once goes to another
    }
    RolloutsChangedLocked();
  }
  ChangedLocked(name);
}

size_t Hub::ForgetGone() {
  std::lock_guard lock(mu_);
  const int64_t cutoff = NowMs() - options_.forget_after.count();
  size_t forgotten = 0;
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    const NodeRecord& r = it->second.record;
    if (!it->second.from_api && !r.connected && r.since_unix_ms < cutoff) {
      log_.Info("node forgotten after its agent stayed away",
                {{"node", it->first}, {"disconnectedSince", Rfc3339(r.since_unix_ms)}});
      (void)placer_.RemoveNode(it->first);
      JournalLocked(it->first);
      it = nodes_.erase(it);
      ++forgotten;
    } else {
      ++it;
    }
  }
  if (forgotten > 0) {
    ChangedLocked();
  }
  return forgotten;
}

bool Hub::PushableLocked(const Entry& e) const {
  return serving_ && active_ && e.stream != nullptr &&
         (!options_.nodes_from_api || e.from_api) && !HeldLocked(e) && !WaitsForPluginLocked(e) &&
         !WaitsForRolloutLocked(e.record.name, e) &&
         (!options_.wait_for_policies || policies_synced_);
}

bool Hub::HeldLocked(const Entry& e) const {
  if (held_.empty()) {
    return false;
  }
  // Its desired state would lack the held Modules, and so unload them: a node that runs
  // one keeps what it runs until the Module is fixed or deleted.
  return !e.reported || std::any_of(e.record.modules.begin(), e.record.modules.end(),
                                    [&](const ReportedModule& m) { return held_.count(m.key); });
}

void Hub::SetApiNode(api::Node node) {
  std::lock_guard lock(mu_);
  const std::string name = node.metadata.name;
  Entry& e = nodes_[name];
  e.record.name = name;
  if (!e.from_api) {
    e.from_api = true;
    e.desired.reset();  // the planner must see it even when equal to a stale copy
    if (e.record.since_unix_ms == 0) {
      e.record.since_unix_ms = NowMs();
    }
  }
  SetNodeLocked(e, std::move(node));
  if (!rollouts_.empty()) {
    NodeRolloutChangedLocked(name, e);  // its .ready label may make it Ready
    RolloutsChangedLocked();
  }
  if (e.stale && PushableLocked(e)) {
    PushLocked(name, e);
  }
  ChangedLocked(name);
}

void Hub::RemoveApiNode(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end() || !it->second.from_api) {
    return;
  }
  (void)placer_.RemoveNode(name);
  if (it->second.stream == nullptr) {
    nodes_.erase(it);
  } else {
    // Its agent keeps what it runs: a deleted Node object is not an order to unload.
    it->second.from_api = false;
    it->second.node = api::Node{};
    it->second.desired.reset();
    it->second.stale = true;
    it->second.planned_stale = true;
  }
  ChangedLocked(name);
}

void Hub::SetPullSecret(const std::string& key, std::optional<std::string> docker_config) {
  std::lock_guard lock(mu_);
  auto it = pull_secrets_.find(key);
  if (docker_config ? (it != pull_secrets_.end() && it->second == *docker_config)
                    : it == pull_secrets_.end()) {
    return;
  }
  if (docker_config) {
    pull_secrets_[key] = *std::move(docker_config);
  } else {
    pull_secrets_.erase(it);
  }
  std::vector<std::string> changed;
  for (const auto& [name, e] : nodes_) {
    std::optional<placement::NodePlacement> p = placer_.PlacementFor(name);
    if (!p) {
      continue;
    }
    for (const auto& dm : p->modules) {
      const auto& s = dm.module->spec.image_repo_secret;
      if (s && absl::StrCat(dm.module->metadata.namespace_, "/", s->name) == key) {
        changed.push_back(name);
        break;
      }
    }
  }
  (void)PushChangedLocked(changed);
  ChangedLocked();
}

void Hub::SetPullSecretState(const std::string& key, PullSecretState state) {
  std::lock_guard lock(mu_);
  if (auto it = pull_secret_states_.find(key);
      it != pull_secret_states_.end() && it->second == state) {
    return;
  }
  pull_secret_states_[key] = std::move(state);
  ChangedLocked();
}

void Hub::SetActive(bool active) {
  std::lock_guard lock(mu_);
  if (active_ == active) {
    return;
  }
  active_ = active;
  if (!active) {
    for (auto& [name, e] : nodes_) {
      if (e.stream != nullptr) {
        e.stream->Close(absl::UnavailableError("this controller replica stopped leading"));
        e.stream = nullptr;
        e.record.connected = false;
        e.record.since_unix_ms = NowMs();
        JournalLocked(name);
      }
    }
    streams_.clear();
  }
  ChangedLocked();
}

bool Hub::active() {
  std::lock_guard lock(mu_);
  return active_;
}

uint64_t Hub::WaitForChange(uint64_t seen, std::chrono::nanoseconds timeout) {
  std::unique_lock lock(mu_);
  clock_.WaitFor(lock, changed_cv_, timeout, [&] { return changes_ != seen; });
  return changes_;
}

HubChanges Hub::WaitForChanges(uint64_t seen, std::chrono::nanoseconds timeout) {
  std::unique_lock lock(mu_);
  clock_.WaitFor(lock, changed_cv_, timeout, [&] { return changes_ != seen; });
  HubChanges out;
  out.number = changes_;
  out.all = seen == 0 || seen < journal_floor_;
  if (!out.all) {
    // The journal is in change order: the entries after `seen` are at its end.
    for (auto it = journal_.rbegin(); it != journal_.rend() && it->first > seen; ++it) {
      out.nodes.insert(it->second);
    }
  }
  return out;
}

void Hub::WakeAll() {
  std::lock_guard lock(mu_);
  ChangedLocked();
}

ControllerStatus Hub::Status() {
  std::lock_guard lock(mu_);
  StatusInput in;
  in.run_id = options_.run_id;
  in.now_unix_ms = NowMs();
  in.errors = errors_;
  in.held = held_;
  in.pull_secrets = pull_secret_states_;
  in.serving = serving_;
  in.active = active_;
  for (const auto& [key, m] : modules_) {
    in.modules.push_back(&m);
  }
  in.plans = placer_.AllPlacements();
  in.plugin_pods = &plugin_pods_;
  if (std::any_of(rollouts_.begin(), rollouts_.end(), [](const auto& kv) { return kv.second.dirty; })) {
    (void)PushChangedLocked(PlanRolloutsLocked());
  }
  for (const auto& [key, r] : rollouts_) {
    in.rollouts.emplace(key, r.state);
  }
  for (const auto& [name, e] : nodes_) {
    in.nodes.push_back(&e.record);
  }
  return Aggregate(in);
}

std::optional<NodeRecord> Hub::Node(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    return std::nullopt;
  }
  return it->second.record;
}

std::optional<api::Module> Hub::ModuleObject(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = modules_.find(key);
  if (it == modules_.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::vector<api::Module> Hub::PluginModules() {
  std::lock_guard lock(mu_);
  std::vector<api::Module> out;
  for (const auto& [key, m] : modules_) {
    if (m.spec.device_plugin.has_value() || m.spec.dra.has_value()) {
      out.push_back(m);
    }
  }
  return out;
}

HubCounters Hub::Counters() {
  std::lock_guard lock(mu_);
  HubCounters out = counters_;
  out.ack_bounds = AckBounds();
  out.ack_counts.resize(out.ack_bounds.size());
  return out;
}

size_t Hub::ConnectedCount() {
  std::lock_guard lock(mu_);
  return streams_.size();
}

}  // namespace kmodd::server

// The hub's rollouts: Modules with a ModulePolicy reach their nodes as the rollout planner
// (controller/rollout/rollout.h) admits them. See hub.h.

#include <algorithm>
#include <charconv>
#include <iterator>

#include <google/protobuf/util/message_differencer.h>

#include "absl/strings/str_cat.h"
#include "controller/server/hub.h"
#include "proto/convert.h"

namespace kmodd::server {

bool SameDriverEntry(const v1::ModuleSpec& a, const v1::ModuleSpec& b) {
  google::protobuf::util::MessageDifferencer d;
  d.IgnoreField(v1::ModuleSpec::descriptor()->FindFieldByName("readiness"));
  return d.Compare(a, b);
}

namespace {


constexpr size_t kMaxFailedListed = 20;

std::string KeyOf(const v1::ModuleSpec& m) { return absl::StrCat(m.namespace_(), "/", m.name()); }

const v1::ModuleSpec* FindSpec(const v1::NodeDesired* d, const std::string& key) {
  if (d == nullptr) {
    return nullptr;
  }
  for (const v1::ModuleSpec& m : d->modules()) {
    if (KeyOf(m) == key) {
      return &m;
    }
  }
  return nullptr;
}

bool Same(const v1::ModuleSpec* a, const v1::ModuleSpec* b) {
  if (a == nullptr || b == nullptr) {
    return a == b;
  }
  return SameDriverEntry(*a, *b);
}

bool SameChecks(const v1::ModuleSpec& a, const v1::ModuleSpec& b) {
  if (a.readiness_size() != b.readiness_size()) {
    return false;
  }
  for (int i = 0; i < a.readiness_size(); ++i) {
    if (!google::protobuf::util::MessageDifferencer::Equals(a.readiness(i), b.readiness(i))) {
      return false;
    }
  }
  return true;
}

const ReportedModule* Reported(const std::vector<ReportedModule>& reported,
                               const std::string& key) {
  auto rm = std::lower_bound(reported.begin(), reported.end(), key,
                             [](const ReportedModule& r, const std::string& k) { return r.key < k; });
  return rm == reported.end() || rm->key != key ? nullptr : &*rm;
}

rollout::Amount ToAmount(const api::NodeAmount& a) { return rollout::Amount{a.count, a.percent}; }

rollout::Policy ToPolicy(const api::RolloutSpec& r) {
  rollout::Policy p;
  if (r.max_parallel) {
    p.max_parallel = ToAmount(*r.max_parallel);
  }
  if (r.max_failed) {
    p.max_failed = ToAmount(*r.max_failed);
  }
  p.canary = r.canary_count;
  p.canary_selector = r.canary_selector;
  p.pause_after_canary = r.canary_pause;
  if (r.canary_soak_seconds) {
    p.canary_soak_ms = *r.canary_soak_seconds * 1000;
  }
  p.rollback = r.on_failure == api::OnFailure::kRollback;
  return p;
}

void SetSpec(v1::NodeDesired& d, const std::string& key, const std::optional<v1::ModuleSpec>& want) {
  auto* modules = d.mutable_modules();
  auto it = std::find_if(modules->begin(), modules->end(),
                         [&](const v1::ModuleSpec& m) { return KeyOf(m) == key; });
  if (!want) {
    if (it != modules->end()) {
      modules->erase(it);
    }
    return;
  }
  if (it != modules->end()) {
    *it = *want;
  } else {
    *d.add_modules() = *want;
    std::sort(modules->begin(), modules->end(),
              [](const v1::ModuleSpec& a, const v1::ModuleSpec& b) { return KeyOf(a) < KeyOf(b); });
  }
}

}  // namespace

uint64_t Hub::SeqOf(const std::string& version) const {
  const std::string prefix = absl::StrCat(options_.run_id, "-");
  if (!version.starts_with(prefix)) {
    return 0;
  }
  uint64_t n = 0;
  const char* begin = version.data() + prefix.size();
  const char* end = version.data() + version.size();
  auto [ptr, ec] = std::from_chars(begin, end, n);
  return ec == std::errc() && ptr == end ? n : 0;
}

const v1::NodeDesired& Hub::PlannedLocked(const std::string& name, const Entry& e) const {
  if (e.planned_stale || !e.planned) {
    auto d = std::make_shared<v1::NodeDesired>();
    if (std::optional<placement::NodePlacement> p = placer_.PlacementFor(name)) {
      *d = DesiredFromPlacement(*p, "");
    }
    // The ModulePolicy's readiness checks go with the entry; they never change what the
    // agent loads (not in its fingerprint), only when it calls the node Ready.
    for (v1::ModuleSpec& m : *d->mutable_modules()) {
      auto r = rollouts_.find(KeyOf(m));
      if (r != rollouts_.end() && !r->second.policy.readiness.empty()) {
        proto::SetReadiness(r->second.policy.readiness, m);
      }
    }
    e.planned = std::move(d);
    e.planned_stale = false;
  }
  return *e.planned;
}

bool Hub::SetPoliciesLocked(const std::map<std::string, api::ModulePolicy>& policies) {
  bool checks_changed = false;
  for (auto it = rollouts_.begin(); it != rollouts_.end();) {
    if (policies.count(it->first) == 0) {
      checks_changed = checks_changed || !it->second.policy.readiness.empty();
      log_.Info("rollout policy removed: the module reaches its nodes at once",
                {{"module", it->first}});
      for (auto& [name, e] : nodes_) {
        e.rollout.erase(it->first);
      }
      it = rollouts_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [key, p] : policies) {
    ModuleRollout& r = rollouts_[key];
    if (r.policy.readiness != p.readiness) {
      checks_changed = true;
    }
    if (p.drain && !options_.drain && !(r.policy.drain == p.drain)) {
      log_.Warn("ModulePolicy drain ignored: standalone mode has no Pods to evict",
                {{"policy", p.Key()}, {"module", key}});
    }
    if (!(r.policy == p)) {
      r.policy = p;
      r.state.policy = r.policy.Key();
      r.dirty = true;
      r.full = true;
    }
  }
  return checks_changed;
}

std::optional<rollout::Progress> Hub::ProgressLocked(const std::string& name, Entry& e,
                                                     const std::string& key, ModuleRollout& r) {
  const v1::ModuleSpec* want = FindSpec(&PlannedLocked(name, e), key);
  if (want == nullptr) {
    return std::nullopt;
  }
  NodeRollout& nr = e.rollout[key];
  const ReportedModule* rm = Reported(e.record.modules, key);
  const v1::ModuleSpec* sent = FindSpec(e.desired.get(), key);
  if (nr.seq == 0 && sent != nullptr) {
    // Sent before the policy came: the last desired state carried it (as did earlier ones).
    nr.seq = SeqOf(e.desired->version());
  }
  // A report counts once it answers the push that carried the entry sent now with its
  // checks: one answering earlier checks says nothing of these (it came in after they were
  // sent, before the agent had them), and taking it would make the entry with checks never
  // run the one a failed node goes back to.
  const bool current = rm != nullptr && nr.seq > 0 &&
                       SeqOf(rm->desired_version) >= std::max(nr.seq, nr.checks_seq);
  if (sent != nullptr && current && rm->phase == api::Phase::kLoaded) {
    nr.good = *sent;  // what it runs well, whether or not the revision's
  }
  rollout::Progress p = rollout::Progress::kNotStarted;
  nr.rolled_back = nr.failed_revision == r.state.revision && nr.before && sent != nullptr &&
                   Same(sent, &*nr.before) && current && rm->phase == api::Phase::kLoaded;
  if (nr.failed_revision == r.state.revision) {
    p = rollout::Progress::kFailed;
  } else if (sent != nullptr && Same(sent, want)) {
    p = rollout::Progress::kUpdating;
    if (current && rm->phase == api::Phase::kLoaded && ReadyLabelSeenLocked(e, key)) {
      p = rollout::Progress::kReady;
      nr.ready_since_ms = rm->since_unix_ms;
    } else if (current && rm->phase == api::Phase::kFailed) {
      p = rollout::Progress::kFailed;
      nr.failed_revision = r.state.revision;
      nr.failure = rm->message;
      log_.Warn("rollout: node failed on the module's new revision",
                {{"node", name}, {"module", key}, {"revision", r.state.revision},
                 {"error", rm->message},
                 {"then", r.policy.rollout.on_failure == api::OnFailure::kRollback
                              ? "rolled back to what it ran before"
                              : "left as it is for inspection"}});
    }
  } else if (e.desired == nullptr && rm != nullptr && rm->version == want->version() &&
             (rm->image.empty() || rm->image == want->container_image())) {
    // This run has sent it nothing yet (a restart): it runs the revision already.
    p = rm->phase == api::Phase::kLoaded   ? rollout::Progress::kReady
        : rm->phase == api::Phase::kFailed ? rollout::Progress::kFailed
                                           : rollout::Progress::kUpdating;
    nr.ready_since_ms = rm->since_unix_ms;
  }
  if (nr.drain != NodeRollout::Drain::kNone && nr.drain != NodeRollout::Drain::kRequested &&
      (p == rollout::Progress::kReady || nr.rolled_back) && options_.undrain) {
    // Ready again (on the new driver, or back on the old one): the node is released.
    nr.drain = NodeRollout::Drain::kNone;
    options_.undrain(name, key);
  }
  return p;
}

bool Hub::ReadyLabelSeenLocked(const Entry& e, const std::string& key) const {
  if (!options_.nodes_from_api) {
    return true;  // standalone: the report is all there is
  }
  // Kubernetes mode: Ready once the Node carries the module's .ready label as the API has
  // it, so that the next nodes start only after what schedulers and users see says so
  // (the labels never show more than maxParallel nodes not ready).
  const size_t slash = key.find('/');
  const std::string label = absl::StrCat("kmm.node.kubernetes.io/", key.substr(0, slash), ".",
                                         key.substr(slash + 1), ".ready");
  return e.node.metadata.labels.count(label) != 0;
}

void Hub::NodeRolloutChangedLocked(const std::string& name, Entry& e) {
  for (auto& [key, r] : rollouts_) {
    if (r.full) {
      continue;  // every node is computed at the next plan
    }
    const bool rolled_back = e.rollout.count(key) != 0 && e.rollout[key].rolled_back;
    std::optional<rollout::Progress> now = ProgressLocked(name, e, key, r);
    NodeRollout& nr = e.rollout[key];
    const rollout::Progress p = now.value_or(rollout::Progress::kNotStarted);
    if (p != nr.progress || now.has_value() != nr.in_rollout || nr.rolled_back != rolled_back) {
      nr.progress = p;
      nr.in_rollout = now.has_value();
      r.dirty = true;
    }
  }
}

std::vector<std::string> Hub::PlanRolloutsLocked() {
  std::set<std::string> push;
  const int64_t now = NowMs();
  for (int round = 0; round < 4; ++round) {
    bool any = false;
    for (auto& [key, r] : rollouts_) {
      if (!r.dirty) {
        continue;
      }
      any = true;
      r.dirty = false;
      const rollout::Output before = r.plan;
      const std::string phase_before = r.state.phase;
      auto m = modules_.find(key);
      if (m == modules_.end()) {
        r.plan = {};
        r.state = RolloutState{};
        r.state.policy = r.policy.Key();
        r.state.phase = "NoModule";
        r.state.message = absl::StrCat("no Module ", key, " in force");
        continue;
      }
      if (m->second.revision != r.state.revision) {
        r.full = true;
        log_.Info("rollout: new revision of the module",
                  {{"module", key}, {"revision", m->second.revision},
                   {"previous", r.state.revision}});
        r.state.revision = m->second.revision;
      }
      const std::string& revision = r.state.revision;
      rollout::Input in;
      in.policy = ToPolicy(r.policy.rollout);
      in.paused = r.policy.paused;
      const int64_t settle_end = started_ms_ + options_.rollout_settle.count();
      const bool settling = now < settle_end;
      in.paused = in.paused || settling;
      in.resumed = r.policy.Annotation(api::kResumedRevisionAnnotation) == revision;
      in.now_ms = now;
      int64_t rolled_back = 0;
      std::vector<std::string> failed_nodes;
      for (auto& [name, e] : nodes_) {
        std::optional<rollout::Progress> p;
        if (r.full) {
          p = ProgressLocked(name, e, key, r);
          NodeRollout& nr = e.rollout[key];
          nr.in_rollout = p.has_value();
          nr.progress = p.value_or(rollout::Progress::kNotStarted);
        } else if (auto it = e.rollout.find(key); it != e.rollout.end() && it->second.in_rollout) {
          p = it->second.progress;  // kept current by NodeRolloutChangedLocked
        }
        if (!p) {
          continue;
        }
        NodeRollout& nr = e.rollout[key];
        // The labels only matter to a canary selector: not copied otherwise.
        in.nodes.push_back(rollout::NodeInput{
            name,
            r.policy.rollout.canary_selector.empty() ? std::map<std::string, std::string>{}
                                                     : e.node.metadata.labels,
            *p, nr.ready_since_ms, e.stream != nullptr});
        if (*p == rollout::Progress::kFailed && failed_nodes.size() < kMaxFailedListed) {
          failed_nodes.push_back(absl::StrCat(name, ": ", nr.failure));
        }
        if (nr.rolled_back) {
          ++rolled_back;  // Ready again on what it ran before
        }
      }
      r.full = false;
      rollout::Output out = rollout::Plan(in);
      const bool undone = r.policy.Annotation(api::kUndoRevisionAnnotation) == revision;
      RolloutState& st = r.state;
      st.nodes = static_cast<int64_t>(in.nodes.size());
      st.updating = out.updating;
      st.ready = out.ready;
      st.failed = out.failed;
      st.updated = out.updating + out.ready + out.failed;
      st.waiting = static_cast<int64_t>(in.nodes.size()) - st.updated;
      st.rolled_back = rolled_back;
      st.canaries.assign(out.canaries.begin(), out.canaries.end());
      st.failed_nodes = std::move(failed_nodes);
      if (undone) {
        out.admitted.clear();
        out.rollback.clear();
        st.phase = "Undone";
        st.message = absl::StrCat("undone: the nodes sent revision ", revision,
                                  " go back to what they ran before it, until the Module "
                                  "changes again");
        for (const rollout::NodeInput& n : in.nodes) {
          if (n.progress != rollout::Progress::kNotStarted) {
            push.insert(n.name);
          }
        }
      } else {
        st.phase = rollout::PhaseName(out.phase);
        st.message = out.message;
      }
      if (settling && !undone && out.phase == rollout::Phase::kPaused && !r.policy.paused) {
        st.phase = "Settling";
        st.message = absl::StrCat("the controller started: no node is started for ",
                                  (settle_end - now + 999) / 1000,
                                  " s more, while agents reconnect");
        out.recheck_at_ms = settle_end;  // Tick plans again then
      }
      if ((phase_before == "Undone") != undone) {
        for (const rollout::NodeInput& n : in.nodes) {
          push.insert(n.name);
        }
      }
      std::set_symmetric_difference(before.admitted.begin(), before.admitted.end(),
                                    out.admitted.begin(), out.admitted.end(),
                                    std::inserter(push, push.end()));
      std::set_symmetric_difference(before.rollback.begin(), before.rollback.end(),
                                    out.rollback.begin(), out.rollback.end(),
                                    std::inserter(push, push.end()));
      if (st.phase != phase_before) {
        log_.Info("rollout phase", {{"module", key},
                                    {"revision", revision},
                                    {"phase", st.phase},
                                    {"message", st.message},
                                    {"ready", st.ready},
                                    {"failed", st.failed},
                                    {"waiting", st.waiting}});
      }
      r.plan = std::move(out);
    }
    if (!any) {
      break;
    }
  }
  return {push.begin(), push.end()};
}

Hub::Gate Hub::GateLocked(const std::string& name, const Entry& e, const std::string& key,
                          const ModuleRollout& r) const {
  if (r.state.phase == "Undone") {
    auto it = e.rollout.find(key);
    const bool started = it != e.rollout.end() && it->second.progress != rollout::Progress::kNotStarted;
    return started ? Gate::kRollBack : Gate::kKeep;
  }
  if (r.state.phase == "NoModule") {
    return Gate::kPlan;
  }
  if (r.plan.rollback.count(name) != 0) {
    return Gate::kRollBack;
  }
  return r.plan.admitted.count(name) != 0 ? Gate::kPlan : Gate::kKeep;
}

void Hub::ApplyRolloutsLocked(const std::string& name, Entry& e, const v1::NodeDesired* old,
                              v1::NodeDesired& next, uint64_t seq) {
  for (const auto& [key, r] : rollouts_) {
    const v1::ModuleSpec* planned = FindSpec(&next, key);
    const v1::ModuleSpec* last = FindSpec(old, key);
    if (planned == nullptr && last == nullptr) {
      continue;
    }
    NodeRollout& nr = e.rollout[key];
    // Taking a Module off a node (its selector no longer matches) is not paced.
    const Gate gate = planned == nullptr ? Gate::kPlan : GateLocked(name, e, key, r);
    std::optional<v1::ModuleSpec> want;
    switch (gate) {
      case Gate::kPlan:
        if (planned != nullptr) {
          want = *planned;
        }
        break;
      case Gate::kKeep:
        if (last != nullptr) {
          want = *last;
        }
        break;
      case Gate::kRollBack:
        want = nr.before;
        break;
    }
    if (want && planned != nullptr && gate == Gate::kKeep) {
      // The policy's readiness checks are not paced: a node kept at its entry runs the
      // checks in force now, without a reload. One sent back runs the entry it ran well,
      // with the checks it passed then (a check written for the new driver does not fail
      // the old one).
      *want->mutable_readiness() = planned->readiness();
    }
    if (last != nullptr && !Same(want ? &*want : nullptr, last) && r.policy.drain &&
        options_.drain) {
      // The driver on the node is about to be replaced or removed: its device users go
      // first (Kubernetes mode). Until they have, the node keeps what it runs.
      v1::ModuleSpec target_spec = want ? *want : v1::ModuleSpec();
      target_spec.clear_readiness();
      const std::string target = absl::StrCat(want ? "set:" : "remove:", target_spec.SerializeAsString());
      if (nr.drain_target != target) {
        nr.drain_target = target;
        nr.drain = NodeRollout::Drain::kRequested;
        nr.drain_message.clear();
        log_.Info("rollout: draining the node before its driver changes",
                  {{"node", name}, {"module", key}, {"revision", r.state.revision}});
        options_.drain(DrainRequest{name, key, target, *r.policy.drain});
      }
      const bool proceed = nr.drain == NodeRollout::Drain::kDone ||
                           (nr.drain == NodeRollout::Drain::kTimedOut &&
                            r.policy.drain->on_timeout == api::OnDrainTimeout::kProceed);
      if (!proceed) {
        want = *last;
        if (nr.drain == NodeRollout::Drain::kTimedOut && nr.failed_revision != r.state.revision) {
          nr.failed_revision = r.state.revision;
          nr.failure = nr.drain_message;
          log_.Warn("rollout: node failed: its device users did not leave in time",
                    {{"node", name}, {"module", key}, {"revision", r.state.revision},
                     {"error", nr.drain_message}});
        }
      }
    }
    if (want && last != nullptr && !SameChecks(*want, *last)) {
      nr.checks_seq = seq;  // the same driver entry, other checks: reports before this are stale
    }
    if (!Same(want ? &*want : nullptr, last)) {
      nr.seq = seq;
      if (gate != Gate::kRollBack) {
        nr.before = nr.good;
      } else {
        log_.Info("rollout: node sent back to what it ran before the revision",
                  {{"node", name}, {"module", key}, {"revision", r.state.revision},
                   {"image", want ? want->container_image() : std::string("(none: unloaded)")}});
      }
    }
    SetSpec(next, key, want);
  }
}

void Hub::DrainDone(const std::string& node, const std::string& module, const std::string& target,
                    bool drained, const std::string& message) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) {
    return;
  }
  auto nr = it->second.rollout.find(module);
  if (nr == it->second.rollout.end() || nr->second.drain_target != target ||
      nr->second.drain != NodeRollout::Drain::kRequested) {
    return;  // superseded by a newer change
  }
  nr->second.drain = drained ? NodeRollout::Drain::kDone : NodeRollout::Drain::kTimedOut;
  nr->second.drain_message = message;
  log_.Info(drained ? "rollout: node drained; its driver is replaced now"
                    : "rollout: drain timed out",
            {{"node", node}, {"module", module}, {"message", message}});
  if (auto r = rollouts_.find(module); r != rollouts_.end()) {
    r->second.dirty = true;
  }
  (void)PushChangedLocked({node});
  ChangedLocked();
}

std::vector<std::string> Hub::NodeNamesLocked() const {
  std::vector<std::string> out;
  out.reserve(nodes_.size());
  for (const auto& [name, e] : nodes_) {
    out.push_back(name);
  }
  return out;
}

bool Hub::WaitsForRolloutLocked(const std::string& name, const Entry& e) const {
  if (e.desired || rollouts_.empty()) {
    return false;
  }
  for (const auto& [key, r] : rollouts_) {
    if (FindSpec(&PlannedLocked(name, e), key) == nullptr || GateLocked(name, e, key, r) == Gate::kPlan) {
      continue;
    }
    if (!e.reported) {
      return true;  // what it runs is not known yet
    }
    auto nr = e.rollout.find(key);
    const bool started = nr != e.rollout.end() && nr->second.progress != rollout::Progress::kNotStarted;
    if (!started && Reported(e.record.modules, key) != nullptr) {
      return true;  // there is no entry of this run to keep it at: sending would unload it
    }
  }
  return false;
}

void Hub::SetPolicies(const std::map<std::string, api::ModulePolicy>& policies) {
  std::lock_guard lock(mu_);
  const bool checks_changed = SetPoliciesLocked(policies);
  const bool first = !policies_synced_;
  policies_synced_ = true;
  if (checks_changed) {
    (void)PushChangedLocked(NodeNamesLocked());  // every entry carries the checks
  }
  (void)PushChangedLocked(PlanRolloutsLocked());
  if (first) {
    (void)PushOwedLocked();  // the nodes that waited for the first list
  }
  ChangedLocked();
}

void Hub::RolloutsChangedLocked() {
  if (options_.rollout_batch.count() == 0) {
    (void)PushChangedLocked(PlanRolloutsLocked());
  } else {
    rollout_cv_.notify_one();
  }
}

void Hub::RunRollouts() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    // Real time, not the hub's clock: this only paces the work.
    rollout_cv_.wait_for(lock, std::chrono::seconds(1), [this] {
      return stopping_ || std::any_of(rollouts_.begin(), rollouts_.end(),
                                      [](const auto& kv) { return kv.second.dirty; });
    });
    if (stopping_) {
      return;
    }
    if (std::any_of(rollouts_.begin(), rollouts_.end(), [](const auto& kv) { return kv.second.dirty; })) {
      (void)PushChangedLocked(PlanRolloutsLocked());
      ChangedLocked();
    }
    // What comes in meanwhile waits for the next plan, at most one batch.
    lock.unlock();
    std::this_thread::sleep_for(options_.rollout_batch);
    lock.lock();
  }
}

void Hub::Tick() {
  std::lock_guard lock(mu_);
  const int64_t now = NowMs();
  bool due = false;
  for (auto& [key, r] : rollouts_) {
    if (r.plan.recheck_at_ms && *r.plan.recheck_at_ms <= now) {
      r.dirty = true;
      due = true;
    }
  }
  if (due) {
    (void)PushChangedLocked(PlanRolloutsLocked());
    ChangedLocked();
  }
}

std::map<std::string, RolloutState> Hub::Rollouts() {
  std::lock_guard lock(mu_);
  if (std::any_of(rollouts_.begin(), rollouts_.end(), [](const auto& kv) { return kv.second.dirty; })) {
    (void)PushChangedLocked(PlanRolloutsLocked());
  }
  std::map<std::string, RolloutState> out;
  for (const auto& [key, r] : rollouts_) {
    out.emplace(key, r.state);
  }
  return out;
}

}  // namespace kmodd::server

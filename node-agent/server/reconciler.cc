#include "node-agent/server/reconciler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "node-agent/reconcile/executor.h"

namespace kmodd::server {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kObserveRetry = std::chrono::seconds(1);
// The host's firmware tree changes with its packages, not with kmodd: looked at again this
// often even when nothing kmodd staged changed.
constexpr auto kShadowRecheck = std::chrono::minutes(5);

// An ImageStore whose answer is already known: the reconciler resolves images on the
// pull pool, and Prepare must not pull on the worker.
class FixedStore : public reconcile::ImageStore {
 public:
  explicit FixedStore(absl::StatusOr<std::string> root) : root_(std::move(root)) {}
  absl::StatusOr<std::string> RootFor(const api::NodeModuleSpec& /*m*/) override { return root_; }

 private:
  absl::StatusOr<std::string> root_;
};

std::string SecretFor(const api::NodeModuleSpec& spec,
                      const std::map<std::string, std::string>& secrets) {
  if (!spec.image_repo_secret) {
    return "";
  }
  auto it = secrets.find(spec.namespace_ + "/" + spec.image_repo_secret->name);
  return it != secrets.end() ? it->second : "";
}

int64_t Millis(Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// Fail-static: without a desired state nothing is unloaded but what an override unloads,
// and no in-tree module is loaded again (a desired Module may still remove it).
std::vector<reconcile::Action> FailStatic(std::vector<reconcile::Action> actions,
                                          bool authoritative,
                                          const std::set<std::string>& unload_overrides) {
  if (authoritative) {
    return actions;
  }
  actions.erase(std::remove_if(actions.begin(), actions.end(),
                               [&](const reconcile::Action& a) {
                                 return a.kind == reconcile::Action::Kind::kReloadInTree ||
                                        (a.kind == reconcile::Action::Kind::kUnload &&
                                         unload_overrides.count(a.key) == 0);
                               }),
                actions.end());
  return actions;
}

}  // namespace

Reconciler::Reconciler(kernel::Kernel& kernel, reconcile::FirmwareStore* firmware,
                       AgentState& state, Metrics& metrics, Logger& log,
                       ReconcilerOptions options)
    : kernel_(kernel), firmware_(firmware), state_(state), metrics_(metrics), log_(log),
      options_(std::move(options)), random_(options_.seed) {}

Reconciler::~Reconciler() { Stop(); }

absl::Status Reconciler::Start() {
  auto journal = reconcile::LoadJournal(options_.journal_path);
  if (!journal.ok()) {
    return journal.status();
  }
  journal_ = std::move(*journal);
  {
    std::lock_guard<std::mutex> lock(mu_);
    published_journal_ = journal_;
    triggered_ = true;
  }
  worker_ = std::thread([this] { Worker(); });
  for (int i = 0; i < std::max(1, options_.pull_threads); ++i) {
    pullers_.emplace_back([this] { PullWorker(); });
  }
  return absl::OkStatus();
}

void Reconciler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  pull_cv_.notify_all();
  if (worker_.joinable()) {
    worker_.join();
  }
  for (auto& t : pullers_) {
    if (t.joinable()) {
      t.join();
    }
  }
  pullers_.clear();
}

void Reconciler::Trigger() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    triggered_ = true;
  }
  cv_.notify_all();
}

void Reconciler::Kick() { Trigger(); }

void Reconciler::PublishDesiredLocked() {
  std::vector<std::string> overrides;
  for (const auto& [key, spec] : load_overrides_) {
    overrides.push_back(key + " (load)");
  }
  for (const auto& key : unload_overrides_) {
    overrides.push_back(key + " (unload)");
  }
  const std::string source =
      desired_ ? desired_->source : (overrides.empty() ? "" : "override");
  state_.SetDesired(desired_ ? desired_->version : "", source, std::move(overrides));
}

void Reconciler::SetDesired(DesiredState d) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_.AddEvent(AgentEvent{0, "DesiredReceived", "",
                               absl::StrCat("version ", d.version, " from ", d.source, ", ",
                                            d.modules.size(), " module(s)"),
                               {}, 0, 0});
    desired_ = std::move(d);
    load_overrides_.clear();
    unload_overrides_.clear();
    // A reload that failed waits for a change; a new desired state is one.
    for (auto g = gates_.begin(); g != gates_.end();) {
      g = g->second.in_tree ? gates_.erase(g) : std::next(g);
    }
    PublishDesiredLocked();
    triggered_ = true;
  }
  cv_.notify_all();
}

std::string Reconciler::OverrideLoad(api::NodeModuleSpec spec) {
  const std::string key = spec.Key();
  {
    std::lock_guard<std::mutex> lock(mu_);
    gates_.erase(key);
    last_error_.erase(key);
    unload_overrides_.erase(key);
    load_overrides_[key] = std::move(spec);
    PublishDesiredLocked();
    triggered_ = true;
  }
  cv_.notify_all();
  return absl::StrCat("override: ", key,
                      " will be loaded from this spec; the next desired state from the "
                      "controller replaces the override");
}

std::string Reconciler::OverrideUnload(const std::string& key) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    gates_.erase(key);
    last_error_.erase(key);
    load_overrides_.erase(key);
    unload_overrides_.insert(key);
    PublishDesiredLocked();
    triggered_ = true;
  }
  cv_.notify_all();
  return absl::StrCat("override: ", key,
                      " will be unloaded (only what kmodd loaded); the next desired state from "
                      "the controller replaces the override");
}

void Reconciler::Worker() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (!triggered_) {
      std::optional<Clock::time_point> wake;
      const auto now = Clock::now();
      for (const auto& [key, g] : gates_) {
        if (!g.terminal && g.next > now && (!wake || g.next < *wake)) {
          wake = g.next;
        }
      }
      auto ready = [this] { return stop_ || triggered_; };
      if (wake) {
        cv_.wait_until(lock, *wake, ready);
      } else {
        cv_.wait(lock, ready);
      }
      if (stop_) {
        break;
      }
    }
    triggered_ = false;
    lock.unlock();
    Pass();
    lock.lock();
  }
}

void Reconciler::PullWorker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    pull_cv_.wait(lock, [this] { return stop_ || !pull_queue_.empty(); });
    if (stop_) {
      return;
    }
    auto job = std::move(pull_queue_.front());
    pull_queue_.pop_front();
    lock.unlock();
    job();
    lock.lock();
  }
}

Reconciler::Inputs Reconciler::TakeInputs() {
  std::lock_guard<std::mutex> lock(mu_);
  Inputs in;
  in.authoritative = desired_.has_value();
  if (desired_) {
    in.version = desired_->version;
    in.modules = desired_->modules;
    in.secrets = desired_->pull_secrets;
  }
  for (const auto& entry : load_overrides_) {
    const std::string& key = entry.first;
    auto it = std::find_if(in.modules.begin(), in.modules.end(),
                           [&key](const api::NodeModuleSpec& m) { return m.Key() == key; });
    if (it != in.modules.end()) {
      *it = entry.second;
    } else {
      in.modules.push_back(entry.second);
    }
  }
  in.unload_overrides = unload_overrides_;
  in.modules.erase(std::remove_if(in.modules.begin(), in.modules.end(),
                                  [&](const api::NodeModuleSpec& m) {
                                    return unload_overrides_.count(m.Key()) != 0;
                                  }),
                   in.modules.end());
  // A new spec for a Module starts its retries afresh.
  for (const auto& spec : in.modules) {
    auto g = gates_.find(spec.Key());
    if (g != gates_.end() && !(g->second.spec == spec)) {
      gates_.erase(g);
      last_error_.erase(spec.Key());
    }
  }
  return in;
}

bool Reconciler::GateOpen(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto g = gates_.find(key);
  return g == gates_.end() || (!g->second.terminal && g->second.next <= Clock::now());
}

void Reconciler::RecordResult(const std::string& key, const absl::Status& s, bool in_tree) {
  std::lock_guard<std::mutex> lock(mu_);
  if (s.ok()) {
    gates_.erase(key);
    last_error_.erase(key);
    return;
  }
  if (!in_tree) {  // a reload's error is in its log line and event, not in a Module's status
    last_error_[key] = s;
  }
  Gate& g = gates_[key];
  g.in_tree = in_tree;
  if (desired_) {
    for (const auto& m : desired_->modules) {
      if (m.Key() == key) {
        g.spec = m;
      }
    }
  }
  if (auto o = load_overrides_.find(key); o != load_overrides_.end()) {
    g.spec = o->second;
  }
  g.terminal = ClassOf(s) == ErrorClass::kTerminal;
  const double unit = std::uniform_real_distribution<double>(0, 1)(random_);
  g.next = Clock::now() + BackoffDelay(options_.retry, g.attempt++, unit);
}

void Reconciler::ReportReload(const reconcile::Action& a, const absl::Status& s) {
  if (s.ok()) {
    log_.Info("in-tree module loaded again", {{"module", a.key}, {"why", a.why}});
    state_.AddEvent(
        AgentEvent{0, "InTreeReloaded", "", absl::StrCat(a.key, ": ", a.why), {}, 0, 0});
    return;
  }
  const bool terminal = ClassOf(s) == ErrorClass::kTerminal;
  log_.Warn("in-tree module reload failed",
            {{"module", a.key},
             {"error", std::string(s.message())},
             {"class", terminal ? "terminal" : "retry"}});
  state_.AddEvent(AgentEvent{
      0, "InTreeReloadFailed", "",
      absl::StrCat(s.message(), terminal ? " (retried when the desired state changes)"
                                         : " (will retry)"),
      {}, 0, 0});
}

// A pull runs image, registry and secret code on untrusted input: whatever escapes it as an
// exception (a bug, bad_alloc) fails this pull with a message, never std::terminate.
absl::StatusOr<std::string> Reconciler::GuardedRootFor(const api::NodeModuleSpec& spec,
                                                       const std::string& secret,
                                                       std::string& digest) {
  auto failed = [&spec](const std::string& what) {
    return absl::InternalError(absl::StrCat("pull of ", spec.config.container_image,
                                            " failed unexpectedly: ", what));
  };
  try {
    auto store = options_.image_store(secret);
    absl::StatusOr<std::string> root = store->RootFor(spec);
    digest = root.ok() ? store->DigestOf(*root) : "";
    return root;
  } catch (const std::exception& e) {
    return failed(e.what());
  } catch (...) {
    return failed("an unknown exception");
  }
}

std::optional<absl::StatusOr<std::string>> Reconciler::Resolve(const api::NodeModuleSpec& spec,
                                                               const std::string& secret) {
  const std::string key = spec.Key();
  std::unique_lock<std::mutex> lock(mu_);
  if (auto it = resolved_.find(key);
      it != resolved_.end() && it->second.spec == spec && it->second.secret == secret) {
    auto g = gates_.find(key);
    const bool due = g == gates_.end() || (!g->second.terminal && g->second.next <= Clock::now());
    if (it->second.root.ok() || !due) {
      return it->second.root;
    }
  }
  if (auto p = pulling_.find(key); p != pulling_.end() && p->second == spec) {
    return std::nullopt;
  }
  if (!options_.image_store) {
    return absl::FailedPreconditionError("no image store is configured");
  }
  auto resolve = [this, spec, secret, key](bool wake) {
    std::string digest;
    absl::StatusOr<std::string> root = GuardedRootFor(spec, secret, digest);
    if (!root.ok()) {
      log_.Warn("image not available", {{"module", key},
                                        {"image", spec.config.container_image},
                                        {"error", std::string(root.status().message())}});
      RecordResult(key, root.status());
    }
    std::lock_guard<std::mutex> l(mu_);
    if (auto p = pulling_.find(key); p != pulling_.end() && p->second == spec) {
      pulling_.erase(p);
    }
    if (root.ok() && resolved_.count(key) != 0 && !resolved_.at(key).root.ok()) {
      gates_.erase(key);  // the image failure is over; a new one starts from scratch
      last_error_.erase(key);
    }
    resolved_[key] = Resolved{spec, secret, std::move(root), digest};
    triggered_ = triggered_ || wake;
  };
  if (spec.config.container_image.rfind("dir:", 0) == 0) {
    lock.unlock();  // a directory on this node: nothing to wait for
    resolve(false);
    lock.lock();
    return resolved_.at(key).root;
  }
  pulling_[key] = spec;
  pull_queue_.push_back([this, resolve] {
    resolve(true);
    cv_.notify_all();
  });
  pull_cv_.notify_one();
  return std::nullopt;
}

void Reconciler::Pass() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_since_ = Clock::now();
  }
  const Inputs in = TakeInputs();
  auto finish = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    busy_since_.reset();
    ++passes_;
  };
  auto observed = kernel_.Observe();
  if (!observed.ok()) {
    // Unknown is not absent: plan nothing, look again soon.
    const std::string msg(observed.status().message());
    if (msg != last_observe_error_) {
      log_.Error("cannot observe the kernel; nothing is planned", {{"error", msg}});
      last_observe_error_ = msg;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      Gate& g = gates_["/observe"];
      g.next = Clock::now() + kObserveRetry;
    }
    finish();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    gates_.erase("/observe");
  }
  last_observe_error_.clear();
  reconcile::ForgetBoot(journal_, observed->boot_id);

  std::vector<reconcile::DesiredModule> prepared;
  std::set<std::string> pulling;
  for (const auto& spec : in.modules) {
    auto root = Resolve(spec, SecretFor(spec, in.secrets));
    if (!root) {
      reconcile::DesiredModule d;
      d.key = spec.Key();
      d.source = spec.config.container_image;
      d.problem = absl::UnavailableError(absl::StrCat("pulling ", spec.config.container_image));
      d.in_tree_remove = spec.config.in_tree_modules_to_remove;  // kept out while it pulls
      prepared.push_back(std::move(d));
      pulling.insert(spec.Key());
      continue;
    }
    FixedStore store(std::move(*root));
    prepared.push_back(reconcile::Prepare(spec, observed->release, store, kernel_));
  }
  std::vector<reconcile::Action> actions = FailStatic(
      reconcile::PlanActions(prepared, *observed, journal_), in.authoritative, in.unload_overrides);
  RefreshShadows();
  Publish(in, prepared, pulling, &*observed);

  reconcile::Executor exec(kernel_, firmware_, options_.journal_path, journal_);
  for (const auto& a : actions) {
    if (!GateOpen(a.key)) {
      continue;
    }
    const bool load = a.kind == reconcile::Action::Kind::kLoad;
    const bool reload = a.kind == reconcile::Action::Kind::kReloadInTree;
    if (!reload) {  // a reload acts on no Module: no status row shows it
      std::lock_guard<std::mutex> lock(mu_);
      acting_ = {a.key, load ? ModuleFacts::Acting::kLoad : ModuleFacts::Acting::kUnload};
    }
    Publish(in, prepared, pulling, &*observed);
    const auto t0 = Clock::now();
    const absl::Status s = exec.Run(a, prepared);
    const auto took = Clock::now() - t0;
    metrics_.RecordAction(reconcile::KindName(a.kind), s.ok(),
                          std::chrono::duration<double>(took).count());
    RecordResult(a.key, s, reload);
    if (reload) {
      ReportReload(a, s);
    } else if (s.ok()) {
      log_.Info(load ? "module loaded" : "module unloaded",
                {{"module", a.key}, {"why", a.why}, {"ms", Millis(took)}});
    } else {
      log_.Warn(load ? "module load failed" : "module unload failed",
                {{"module", a.key},
                 {"why", a.why},
                 {"error", std::string(s.message())},
                 {"class", ClassOf(s) == ErrorClass::kTerminal ? "terminal" : "retry"}});
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      acting_.reset();
    }
  }
  auto after = kernel_.Observe();
  RefreshShadows();
  Publish(in, prepared, pulling, after.ok() ? &*after : &*observed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    published_journal_ = journal_;
    published_prepared_ = prepared;
    published_authoritative_ = in.authoritative;
    published_unload_overrides_ = in.unload_overrides;
  }
  metrics_.RecordReconcile();
  finish();
}

void Reconciler::RefreshShadows() {
  if (firmware_ == nullptr) {
    return;
  }
  const auto now = Clock::now();
  std::map<std::string, std::vector<std::string>> found;
  bool changed = false;
  for (auto it = shadow_checks_.begin(); it != shadow_checks_.end();) {
    auto j = journal_.modules.find(it->first);
    if (j == journal_.modules.end() || j->second.firmware.empty()) {
      it = shadow_checks_.erase(it);
      changed = true;
    } else {
      ++it;
    }
  }
  for (const auto& [key, entry] : journal_.modules) {
    if (entry.firmware.empty()) {
      continue;
    }
    auto check = shadow_checks_.find(key);
    if (check != shadow_checks_.end() && check->second.files == entry.firmware &&
        now - check->second.at < kShadowRecheck) {
      continue;
    }
    std::vector<std::string> warnings;
    for (const firmware::Shadow& s : firmware_->Shadowed(entry.firmware)) {
      warnings.push_back(firmware::ShadowWarning(s));
    }
    shadow_checks_[key] = ShadowCheck{entry.firmware, now};
    found[key] = std::move(warnings);
    changed = true;
  }
  if (!changed) {
    return;
  }
  std::vector<std::pair<std::string, std::string>> fresh;  // module, warning
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = warnings_.begin(); it != warnings_.end();) {
      it = shadow_checks_.count(it->first) == 0 ? warnings_.erase(it) : std::next(it);
    }
    for (auto& [key, warnings] : found) {
      const std::vector<std::string>& before = warnings_[key];
      for (const std::string& w : warnings) {
        if (std::find(before.begin(), before.end(), w) == before.end()) {
          fresh.emplace_back(key, w);
        }
      }
      warnings_[key] = std::move(warnings);
    }
  }
  for (const auto& [key, w] : fresh) {
    log_.Warn("staged firmware shadows a host firmware file", {{"module", key}, {"warning", w}});
  }
}

absl::StatusOr<Reconciler::PlanResult> Reconciler::Plan() {
  reconcile::Journal journal;
  std::vector<reconcile::DesiredModule> prepared;
  bool authoritative = false;
  std::set<std::string> unload_overrides;
  {
    std::lock_guard<std::mutex> lock(mu_);
    journal = published_journal_;
    prepared = published_prepared_;
    authoritative = published_authoritative_;
    unload_overrides = published_unload_overrides_;
  }
  auto observed = kernel_.Observe();
  if (!observed.ok()) {
    return observed.status();
  }
  reconcile::ForgetBoot(journal, observed->boot_id);
  PlanResult r;
  r.actions = FailStatic(reconcile::PlanActions(prepared, *observed, journal), authoritative,
                         unload_overrides);
  for (const auto& d : prepared) {
    if (!d.problem.ok()) {
      r.problems.push_back(absl::StrCat(d.key, ": ", d.problem.message()));
    }
  }
  return r;
}

std::set<std::string> Reconciler::InUseTrees() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::string> out;
  for (const auto& [key, r] : resolved_) {
    if (r.root.ok()) {
      out.insert(*r.root);
    }
  }
  for (const auto& [key, e] : published_journal_.modules) {
    if (!e.tree.empty()) {
      out.insert(e.tree);
    }
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> Reconciler::PruneImages(
    const std::function<absl::StatusOr<std::vector<std::string>>(const std::set<std::string>&)>&
        prune) {
  std::set<std::string> keep = InUseTrees();
  std::lock_guard<std::mutex> lock(mu_);
  if (!pulling_.empty()) {
    return absl::UnavailableError("a pull is in flight; prune again when it is done");
  }
  return prune(keep);
}

bool Reconciler::Wedged() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_since_ && Clock::now() - *busy_since_ > options_.wedged_after;
}

uint64_t Reconciler::passes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return passes_;
}

}  // namespace kmodd::server

#include "node-agent/server/reconciler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "node-agent/reconcile/executor.h"
#include "node-agent/reconcile/prepare.h"

namespace kmodd::agent {

namespace {

constexpr auto kObserveRetry = std::chrono::seconds(1);
// The host's firmware tree changes with its packages, not with kmodd: looked at again this
// often even when nothing kmodd staged changed.
constexpr auto kShadowRecheck = std::chrono::minutes(5);

// An ImageStore whose answer is already known: the image resolver resolves images on its
// pull pool, and Prepare must not pull on the worker.
class FixedStore : public reconcile::ImageStore {
 public:
  explicit FixedStore(absl::StatusOr<std::string> root) : root_(std::move(root)) {}
  absl::StatusOr<std::string> RootFor(const api::NodeModuleSpec& /*m*/) override { return root_; }

 private:
  absl::StatusOr<std::string> root_;
};

int64_t Millis(Clock::Monotonic::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

}  // namespace

Reconciler::Reconciler(kernel::Kernel& kernel, reconcile::FirmwareStore* firmware,
                       AgentState& state, Metrics& metrics, Logger& log, const Clock& clock,
                       ReconcilerOptions options)
    : kernel_(kernel), firmware_(firmware), state_(state), metrics_(metrics), log_(log),
      clock_(clock), options_(std::move(options)),
      images_(options_.image_store, options_.pull_threads, log,
              ImageResolver::Hooks{
                  [this](const std::string& key, const absl::Status& s) { RecordResult(key, s); },
                  [this](const std::string& key, bool recovered, bool background) {
                    {
                      std::lock_guard<std::mutex> lock(mu_);
                      if (recovered) {  // the image failure is over; a new one starts afresh
                        planner_.gates().Clear(key);
                      }
                      triggered_ = triggered_ || background;
                    }
                    if (background) {
                      cv_.notify_all();
                    }
                  }}),
      readiness_(state, log, clock), planner_(options_.retry), random_(options_.seed) {
  if (firmware_ != nullptr) {
    shadows_.emplace(*firmware_, kShadowRecheck);
  }
}

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
    last_pass_ = last_pass_start_ = clock_.MonotonicNow();
    triggered_ = true;
  }
  readiness_.Start();
  worker_ = std::thread([this] { Worker(); });
  images_.Start();
  return absl::OkStatus();
}

void Reconciler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) {
    worker_.join();
  }
  images_.Stop();
  readiness_.Stop();
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
  PassPlanner::Summary s = planner_.Describe();
  state_.SetDesired(s.version, s.source, std::move(s.overrides));
}

void Reconciler::SetDesired(DesiredState d) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_.AddEvent(AgentEvent{0, "DesiredReceived", "",
                               absl::StrCat("version ", d.version, " from ", d.source, ", ",
                                            d.modules.size(), " module(s)"),
                               {}, 0, 0});
    planner_.SetDesired(std::move(d));
    PublishDesiredLocked();
    triggered_ = true;
  }
  cv_.notify_all();
}

std::string Reconciler::OverrideLoad(api::NodeModuleSpec spec) {
  std::string message;
  {
    std::lock_guard<std::mutex> lock(mu_);
    message = planner_.OverrideLoad(std::move(spec));
    PublishDesiredLocked();
    triggered_ = true;
  }
  cv_.notify_all();
  return message;
}

std::string Reconciler::OverrideUnload(const std::string& key) {
  std::string message;
  {
    std::lock_guard<std::mutex> lock(mu_);
    message = planner_.OverrideUnload(key);
    PublishDesiredLocked();
    triggered_ = true;
  }
  cv_.notify_all();
  return message;
}

void Reconciler::Worker() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (!triggered_) {
      // Woken by a trigger, a retry gate that opens, or the resync period: a pass either way.
      // A gate that opened during the last pass (a backoff shorter than the pass) is due at
      // once: the wait ends immediately.
      Clock::Monotonic wake = last_pass_ + options_.resync_every;
      if (auto gate = planner_.gates().NextOpening(last_pass_start_); gate && *gate < wake) {
        wake = *gate;
      }
      clock_.WaitUntil(lock, cv_, wake, [this] { return stop_ || triggered_; });
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

void Reconciler::RecordResult(const std::string& key, const absl::Status& s, bool in_tree) {
  std::lock_guard<std::mutex> lock(mu_);
  const double unit = std::uniform_real_distribution<double>(0, 1)(random_);
  planner_.RecordResult(key, s, clock_.MonotonicNow(), unit, in_tree);
}

void Reconciler::ReportAction(const reconcile::Action& a, const absl::Status& s,
                              Clock::Monotonic::duration took) {
  const bool terminal = !s.ok() && ClassOf(s) == ErrorClass::kTerminal;
  if (a.kind == reconcile::Action::Kind::kReloadInTree) {
    if (s.ok()) {
      log_.Info("in-tree module loaded again", {{"module", a.key}, {"why", a.why}});
      state_.AddEvent(
          AgentEvent{0, "InTreeReloaded", "", absl::StrCat(a.key, ": ", a.why), {}, 0, 0});
      return;
    }
    log_.Warn("in-tree module reload failed",
              {{"module", a.key},
               {"error", std::string(s.message())},
               {"class", terminal ? "terminal" : "retry"}});
    state_.AddEvent(AgentEvent{
        0, "InTreeReloadFailed", "",
        absl::StrCat(s.message(), terminal ? " (retried when the desired state changes)"
                                           : " (will retry)"),
        {}, 0, 0});
    return;
  }
  const bool load = a.kind == reconcile::Action::Kind::kLoad;
  if (s.ok()) {
    log_.Info(load ? "module loaded" : "module unloaded",
              {{"module", a.key}, {"why", a.why}, {"ms", Millis(took)}});
    return;
  }
  log_.Warn(load ? "module load failed" : "module unload failed",
            {{"module", a.key},
             {"why", a.why},
             {"error", std::string(s.message())},
             {"class", terminal ? "terminal" : "retry"}});
}

std::vector<PreparedModule> Reconciler::PrepareAll(const PassInputs& in,
                                                   const kernel::KernelState& observed) {
  std::vector<PreparedModule> out;
  out.reserve(in.modules.size());
  for (const PassModule& pm : in.modules) {
    bool retry_due = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      retry_due = planner_.gates().Open(pm.spec.Key(), clock_.MonotonicNow());
    }
    auto root = images_.Resolve(pm.spec, pm.pull_secret, retry_due);
    PreparedModule m{pm, {}, false};
    if (!root) {
      m.prepared.key = pm.spec.Key();
      m.prepared.source = pm.spec.config.container_image;
      m.prepared.problem =
          absl::UnavailableError(absl::StrCat("pulling ", pm.spec.config.container_image));
      // Kept out while it pulls.
      m.prepared.in_tree_remove = pm.spec.config.in_tree_modules_to_remove;
      m.pulling = true;
    } else {
      FixedStore store(std::move(*root));
      m.prepared = reconcile::Prepare(pm.spec, observed.release, store, kernel_);
    }
    out.push_back(std::move(m));
  }
  return out;
}

void Reconciler::Pass() {
  PassInputs in;
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_since_ = last_pass_start_ = clock_.MonotonicNow();
    in = planner_.TakeInputs();
  }
  auto finish = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    busy_since_.reset();
    last_pass_ = clock_.MonotonicNow();
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
      planner_.gates().Hold("/observe", clock_.MonotonicNow() + kObserveRetry);
    }
    finish();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    planner_.gates().Clear("/observe");
  }
  last_observe_error_.clear();
  reconcile::ForgetBoot(journal_, observed->boot_id);

  std::set<std::string> desired_keys;
  for (const PassModule& m : in.modules) {
    desired_keys.insert(m.spec.Key());
  }
  images_.Retain(desired_keys);  // a tree of a Module no longer desired is not in use
  const std::vector<PreparedModule> modules = PrepareAll(in, *observed);
  std::vector<reconcile::DesiredModule> prepared;
  prepared.reserve(modules.size());
  for (const PreparedModule& m : modules) {
    prepared.push_back(m.prepared);
  }
  const PassPlan plan = PlanPass(in.fail_static, prepared, *observed, journal_);
  RefreshShadows();
  Publish(in, modules, *observed);

  reconcile::Executor exec(kernel_, firmware_, options_.journal_path, journal_);
  for (const auto& a : plan.actions) {
    const bool reload = a.kind == reconcile::Action::Kind::kReloadInTree;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!planner_.gates().Open(a.key, clock_.MonotonicNow())) {
        continue;
      }
      if (!reload) {  // a reload acts on no Module: no status row shows it
        acting_ = {a.key, a.kind == reconcile::Action::Kind::kLoad ? ModuleFacts::Acting::kLoad
                                                                    : ModuleFacts::Acting::kUnload};
      }
    }
    Publish(in, modules, *observed);
    const auto t0 = clock_.MonotonicNow();
    const absl::Status s = exec.Run(a, prepared);
    const auto took = clock_.MonotonicNow() - t0;
    metrics_.RecordAction(reconcile::KindName(a.kind), s.ok(),
                          std::chrono::duration<double>(took).count());
    RecordResult(a.key, s, reload);
    ReportAction(a, s, took);
    {
      std::lock_guard<std::mutex> lock(mu_);
      acting_.reset();
    }
  }
  auto after = kernel_.Observe();
  RefreshShadows();
  Publish(in, modules, after.ok() ? *after : *observed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    published_journal_ = journal_;
    published_prepared_ = std::move(prepared);
    published_fail_static_ = in.fail_static;
  }
  metrics_.RecordReconcile();
  finish();
}

void Reconciler::Publish(const PassInputs& in, const std::vector<PreparedModule>& modules,
                         const kernel::KernelState& observed) {
  StatusContext ctx;
  ctx.desired_version = in.version;
  ctx.fail_static = in.fail_static;
  ctx.journal = &journal_;
  ctx.observed = &observed;
  ctx.warnings = shadows_ ? &shadows_->warnings() : nullptr;
  for (const PreparedModule& m : modules) {
    if (auto r = images_.Lookup(m.input.spec)) {
      ctx.images[m.prepared.key] = ImageFacts{r->error, r->digest};
    }
  }
  std::map<std::string, ReadinessInput> checks;
  for (const PreparedModule& m : modules) {
    if (!m.input.spec.readiness.empty()) {
      checks[m.prepared.key] = ReadinessInput{m.input.spec.readiness, m.prepared.fingerprint};
    }
  }
  std::vector<ModuleStatus> rows;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ctx.retries = &planner_.gates();
    ctx.acting = acting_;
    rows = ProjectStatus(modules, ctx);
  }
  readiness_.Publish(std::move(rows), checks);
}

void Reconciler::RefreshShadows() {
  if (!shadows_) {
    return;
  }
  for (const auto& [key, w] : shadows_->Refresh(journal_, clock_.MonotonicNow())) {
    log_.Warn("staged firmware shadows a host firmware file", {{"module", key}, {"warning", w}});
  }
}

absl::StatusOr<PassPlan> Reconciler::PreviewPass() {
  reconcile::Journal journal;
  std::vector<reconcile::DesiredModule> prepared;
  FailStatic fail_static;
  {
    std::lock_guard<std::mutex> lock(mu_);
    journal = published_journal_;
    prepared = published_prepared_;
    fail_static = published_fail_static_;
  }
  auto observed = kernel_.Observe();
  if (!observed.ok()) {
    return observed.status();
  }
  reconcile::ForgetBoot(journal, observed->boot_id);
  return PlanPass(fail_static, prepared, *observed, journal);
}

std::set<std::string> Reconciler::InUseTrees() const {
  std::set<std::string> out = images_.Roots();
  std::lock_guard<std::mutex> lock(mu_);
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
  std::set<std::string> journal_trees;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, e] : published_journal_.modules) {
      if (!e.tree.empty()) {
        journal_trees.insert(e.tree);
      }
    }
  }
  // The resolver's trees are read while no pull can start, so none lands in between.
  return images_.WhileIdle([&](const std::set<std::string>& roots) {
    std::set<std::string> keep = roots;
    keep.insert(journal_trees.begin(), journal_trees.end());
    return prune(keep);
  });
}

bool Reconciler::Wedged() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_since_ && clock_.MonotonicNow() - *busy_since_ > options_.wedged_after;
}

uint64_t Reconciler::passes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return passes_;
}

}  // namespace kmodd::agent

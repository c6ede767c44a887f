#pragma once

// The daemon's reconcile loop, on its own worker thread. Level-based: every pass reads the
// whole kernel state and the journal, prepares every desired Module, and carries out what
// the pass planner decides; it never asks what woke it (new desired state, a kernel
// uevent, a retry timer, a finished pull).
//
// The loop wires four parts: the pass planner (pass_planner.h: desired state, overrides,
// fail-static, retry gates; pure), the image resolver (image_resolver.h: the pull pool and
// its cache), the action planner and executor (reconcile/), and the status projector
// (status_projector.h: one status row per Module for AgentState).
//
// Time. Every timing decision (retry gates, the resync period, wedged detection, the
// firmware shadow re-check) reads the injected Clock and every wait is on it, so that
// FakeClock tests them without sleeping.
//
// Independence. Images are resolved on the pull pool, so a slow pull never delays another
// Module; kernel actions run one at a time on the worker, and a failure only gates its own
// Module (retried with capped, jittered backoff; terminal errors wait for a new desired
// state). Fail-static: without a desired state nothing is unloaded, and a Module whose new
// image is not ready yet keeps what it runs.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "api/node_modules_config.h"
#include "common/clock.h"
#include "common/log.h"
#include "node-agent/kernel/kernel.h"
#include "node-agent/reconcile/action_planner.h"
#include "node-agent/reconcile/journal.h"
#include "node-agent/reconcile/stores.h"
#include "node-agent/server/agent_state.h"
#include "node-agent/server/backoff.h"
#include "node-agent/server/image_resolver.h"
#include "node-agent/server/metrics.h"
#include "node-agent/server/pass_planner.h"
#include "node-agent/server/readiness.h"
#include "node-agent/server/shadow_checks.h"
#include "node-agent/server/status_projector.h"

namespace kmodd::agent {

struct ReconcilerOptions {
  std::string journal_path;
  BackoffPolicy retry{std::chrono::milliseconds(1000), std::chrono::minutes(5)};
  // /healthz fails when one pass has run longer than this.
  std::chrono::milliseconds wedged_after = std::chrono::minutes(10);
  // A pass runs at least this often, even if no event says so (a missed uevent).
  std::chrono::milliseconds resync_every = std::chrono::minutes(5);
  int pull_threads = 2;
  // The image store for one Module's pull, given its pull secret ("" = none: the store
  // may fall back to a configured one). Called on a pull thread.
  ImageResolver::StoreFactory image_store;
  uint64_t seed = std::random_device{}();
};

class Reconciler {
 public:
  Reconciler(kernel::Kernel& kernel, reconcile::FirmwareStore* firmware, AgentState& state,
             Metrics& metrics, Logger& log, const Clock& clock, ReconcilerOptions options);
  ~Reconciler();
  Reconciler(const Reconciler&) = delete;
  Reconciler& operator=(const Reconciler&) = delete;

  // Loads the journal and starts the worker and the pull pool; reconciles at once.
  [[nodiscard]] absl::Status Start();
  void Stop();

  // Replaces the desired state (and drops every override).
  void SetDesired(DesiredState d);
  // Debugging overrides, replaced by the next SetDesired. Returns what to tell the user.
  std::string OverrideLoad(api::NodeModuleSpec spec);
  std::string OverrideUnload(const std::string& key);
  // Something changed in the kernel: reconcile now.
  void Kick();

  // What a pass would do now (`agentctl plan`), from the last pass's preparation and the
  // kernel as it is; changes nothing.
  [[nodiscard]] absl::StatusOr<PassPlan> PreviewPass();

  // The driver trees the desired Modules and the journal use.
  std::set<std::string> InUseTrees() const;
  // Runs `prune` with the in-use trees, unless a pull is in flight (Unavailable).
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> PruneImages(
      const std::function<absl::StatusOr<std::vector<std::string>>(const std::set<std::string>&)>&
          prune);

  // A device uevent (kernel::DeviceEvents): readiness checks of devices look again.
  void DevicesChanged() { readiness_.DevicesChanged(); }
  void PollDevices() { readiness_.PollDevices(); }

  // One pass has run for longer than wedged_after (for /healthz).
  bool Wedged() const;
  uint64_t passes() const;

 private:
  void Worker();
  void Pass();
  // Resolves and prepares every Module of `in` against the observed kernel.
  std::vector<PreparedModule> PrepareAll(const PassInputs& in, const kernel::KernelState& observed);
  void Publish(const PassInputs& in, const std::vector<PreparedModule>& modules,
               const kernel::KernelState& observed);
  void RecordResult(const std::string& key, const absl::Status& s, bool in_tree = false);
  // Logs an action's outcome (and an in-tree reload's as an event too).
  void ReportAction(const reconcile::Action& a, const absl::Status& s,
                    Clock::Monotonic::duration took);
  // Logs each firmware shadowing the host's that the shadow checks found for the first time.
  void RefreshShadows();
  void Trigger();
  void PublishDesiredLocked();

  kernel::Kernel& kernel_;
  reconcile::FirmwareStore* firmware_;
  AgentState& state_;
  Metrics& metrics_;
  Logger& log_;
  const Clock& clock_;
  ReconcilerOptions options_;
  ImageResolver images_;
  Readiness readiness_;  // lays the readiness checks' verdicts over the rows it publishes

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool triggered_ = false;
  PassPlanner planner_;
  std::optional<std::pair<std::string, ModuleFacts::Acting>> acting_;
  std::optional<Clock::Monotonic> busy_since_;
  Clock::Monotonic last_pass_start_;  // when the last pass began (or the worker started)
  Clock::Monotonic last_pass_;        // when it ended
  uint64_t passes_ = 0;
  std::mt19937_64 random_;
  // What the last pass saw, for PreviewPass and InUseTrees.
  reconcile::Journal published_journal_;
  std::vector<reconcile::DesiredModule> published_prepared_;
  FailStatic published_fail_static_;

  // The worker's own.
  reconcile::Journal journal_;
  std::string last_observe_error_;
  std::optional<ShadowChecks> shadows_;  // none without a firmware store
  std::thread worker_;
};

}  // namespace kmodd::agent

#pragma once

// The daemon's reconcile loop, on its own worker thread. Level-based: every pass reads the
// whole kernel state and the journal, prepares every desired Module, plans
// (reconcile::PlanActions) and executes; it never asks what woke it (new desired state, a
// kernel uevent, a retry timer, a finished pull).
//
// Independence. Images are resolved on a small pull pool, so a slow pull never delays
// another Module; kernel actions run one at a time on the worker, and a failure only gates
// its own Module (retried with capped, jittered backoff; terminal errors wait for a new
// desired state). Fail-static: without a desired state nothing is unloaded, and a Module
// whose new image is not ready yet keeps what it runs.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/log.h"
#include "api/node_modules_config.h"
#include "node-agent/kernel/kernel.h"
#include "node-agent/reconcile/journal.h"
#include "node-agent/reconcile/action_planner.h"
#include "node-agent/reconcile/prepare.h"
#include "node-agent/reconcile/stores.h"
#include "node-agent/server/agent_state.h"
#include "node-agent/server/backoff.h"
#include "node-agent/server/metrics.h"

namespace kmodd::server {

struct DesiredState {
  std::string version;
  std::string source;  // controller, journal (persisted, after a restart)
  std::vector<api::NodeModuleSpec> modules;
  std::map<std::string, std::string> pull_secrets;  // "<namespace>/<secret>" -> dockerconfigjson
};

struct ReconcilerOptions {
  std::string journal_path;
  BackoffPolicy retry{std::chrono::milliseconds(1000), std::chrono::minutes(5)};
  // /healthz fails when one pass has run longer than this.
  std::chrono::milliseconds wedged_after = std::chrono::minutes(10);
  int pull_threads = 2;
  // The image store for one Module's pull, given its pull secret ("" = none: the store
  // may fall back to a configured one). Called on a pull thread.
  std::function<std::unique_ptr<reconcile::ImageStore>(const std::string& pull_secret)> image_store;
  uint64_t seed = std::random_device{}();
};

class Reconciler {
 public:
  Reconciler(kernel::Kernel& kernel, reconcile::FirmwareStore* firmware, AgentState& state,
             Metrics& metrics, Logger& log, ReconcilerOptions options);
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

  struct PlanResult {
    std::vector<reconcile::Action> actions;
    std::vector<std::string> problems;  // "namespace/name: why"
  };
  // What a pass would do now, from the last pass's preparation; changes nothing.
  [[nodiscard]] absl::StatusOr<PlanResult> Plan();

  // The driver trees the desired Modules and the journal use.
  std::set<std::string> InUseTrees() const;
  // Runs `prune` with the in-use trees, unless a pull is in flight (Unavailable).
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> PruneImages(
      const std::function<absl::StatusOr<std::vector<std::string>>(const std::set<std::string>&)>&
          prune);

  bool Wedged() const;
  uint64_t passes() const;

 private:
  struct Gate {  // retry state of one Module
    api::NodeModuleSpec spec;
    int attempt = 0;
    std::chrono::steady_clock::time_point next;
    bool terminal = false;
    bool in_tree = false;  // the gate of an in-tree module's reload, not of a Module
  };
  struct Resolved {  // an image resolution, valid for exactly this spec and secret
    api::NodeModuleSpec spec;
    std::string secret;
    absl::StatusOr<std::string> root;
    std::string digest;  // of the image `root` came from, when it is one
  };
  struct Inputs {
    bool authoritative = false;  // a desired state is known (else nothing is unloaded)
    std::string version;
    std::vector<api::NodeModuleSpec> modules;
    std::map<std::string, std::string> secrets;
    std::set<std::string> unload_overrides;
  };

  void Worker();
  void PullWorker();
  // The image store's root for `spec` (and its digest), any exception turned into a Status.
  absl::StatusOr<std::string> GuardedRootFor(const api::NodeModuleSpec& spec,
                                             const std::string& secret, std::string& digest);
  void Pass();
  Inputs TakeInputs();
  // The root for `spec`, an error, or nullopt while its pull runs (started if needed).
  std::optional<absl::StatusOr<std::string>> Resolve(const api::NodeModuleSpec& spec,
                                                     const std::string& secret);
  void Publish(const Inputs& in, const std::vector<reconcile::DesiredModule>& prepared,
               const std::set<std::string>& pulling, const kernel::KernelState* observed);
  void RecordResult(const std::string& key, const absl::Status& s, bool in_tree = false);
  // Logs an in-tree reload's outcome and adds it to the agent's events.
  void ReportReload(const reconcile::Action& a, const absl::Status& s);
  bool GateOpen(const std::string& key);
  // Looks again (at most every kShadowRecheck per Module, and whenever its staged files
  // change) for staged firmware shadowing the host's; logs each new finding once.
  void RefreshShadows();
  void Trigger();
  void PublishDesiredLocked();

  kernel::Kernel& kernel_;
  reconcile::FirmwareStore* firmware_;
  AgentState& state_;
  Metrics& metrics_;
  Logger& log_;
  ReconcilerOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool triggered_ = false;
  std::optional<DesiredState> desired_;
  std::map<std::string, api::NodeModuleSpec> load_overrides_;
  std::set<std::string> unload_overrides_;
  std::map<std::string, Resolved> resolved_;
  std::map<std::string, api::NodeModuleSpec> pulling_;
  std::map<std::string, Gate> gates_;
  std::map<std::string, absl::Status> last_error_;
  std::optional<std::pair<std::string, ModuleFacts::Acting>> acting_;
  std::optional<std::chrono::steady_clock::time_point> busy_since_;
  uint64_t passes_ = 0;
  std::mt19937_64 random_;
  // What the last pass saw, for Plan and InUseTrees.
  reconcile::Journal published_journal_;
  std::vector<reconcile::DesiredModule> published_prepared_;
  bool published_authoritative_ = false;
  std::set<std::string> published_unload_overrides_;

  std::deque<std::function<void()>> pull_queue_;
  std::condition_variable pull_cv_;

  reconcile::Journal journal_;  // the worker's own
  std::string last_observe_error_;
  struct ShadowCheck {  // the worker's own
    std::vector<std::string> files;
    std::chrono::steady_clock::time_point at;
  };
  std::map<std::string, ShadowCheck> shadow_checks_;
  std::map<std::string, std::vector<std::string>> warnings_;  // under mu_, for Publish
  std::thread worker_;
  std::vector<std::thread> pullers_;
};

}  // namespace kmodd::server

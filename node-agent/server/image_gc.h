#pragma once

// The image cache's garbage collection. PruneUnusedImages decides what goes; ImageGc runs
// it every period on a thread of its own, off the event loop (removing trees takes a
// while). A round that finds a pull in flight is skipped (logged) and the next one tries
// again: a tree being pulled is in use by definition, and only the pull knows it yet.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/log.h"
#include "node-agent/image/cache.h"
#include "node-agent/server/agent_state.h"
#include "node-agent/server/reconciler.h"

namespace kmodd::agent {

// Removes the cached image trees no module uses: neither a tree the reconciler resolved or
// the journal records, nor one an image of the desired state (`state`'s modules) resolved to
// before (so a node that restarts without its registry keeps what it will need). Refused
// while a pull is in flight. Returns the removed paths. `agentctl images --prune` and the
// agent's periodic GC both come here.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> PruneUnusedImages(Reconciler& reconciler,
                                                                       image::ImageCache& cache,
                                                                       const AgentState& state);

class ImageGc {
 public:
  using Prune = std::function<absl::StatusOr<std::vector<std::string>>()>;

  ImageGc(const Clock& clock, std::chrono::nanoseconds period, Prune prune, Logger& log);
  ~ImageGc();
  ImageGc(const ImageGc&) = delete;
  ImageGc& operator=(const ImageGc&) = delete;

  // The first round runs one period after Start.
  void Start();
  // Waits for a round in progress.
  void Stop();
  // Rounds done so far, pruned or skipped.
  uint64_t rounds() const;

 private:
  void Run();
  absl::StatusOr<std::vector<std::string>> Guarded();

  const Clock& clock_;
  const std::chrono::nanoseconds period_;
  const Prune prune_;
  Logger& log_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  uint64_t rounds_ = 0;
  std::thread thread_;
};

}  // namespace kmodd::agent

#pragma once

// A work queue of keys, controller-runtime's (client-go's workqueue with its rate limiter),
// for reconcilers that each own a kind of key ("node/<name>", "module/<ns>/<name>"):
//   - coalescing: a key added while it is queued is queued once;
//   - one at a time per key: a key added while a worker processes it is queued again
//     when that worker calls Done, never handed to a second worker meanwhile;
//   - delayed adds (AddAfter): the key is queued when its time comes on the Clock; an
//     earlier time wins; an immediate Add makes it due at once;
//   - per-key exponential backoff (AddRateLimited): base_delay * 2^failures, capped at
//     max_delay, with up to `jitter` of it added at random so that keys failing together
//     do not retry together; Forget resets a key's count after a success.
// Workers call Get (blocking) or TryGet, process the key, then Done. ShutDown wakes every
// Get, which returns nullopt; the keys still queued are dropped.
//
// Waits on the injected Clock: with FakeClock, delays pass when the test advances it.
// Thread-safe.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>

#include "common/clock.h"

namespace kmodd::server {

struct WorkQueueOptions {
  std::chrono::milliseconds base_delay{1000};
  std::chrono::milliseconds max_delay{std::chrono::minutes(2)};
  double jitter = 0.1;  // a fraction of the delay, added at random
  uint32_t seed = std::random_device{}();
};

class WorkQueue {
 public:
  explicit WorkQueue(const Clock& clock, WorkQueueOptions options = {});
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Add(const std::string& key);
  void AddAfter(const std::string& key, std::chrono::nanoseconds delay);
  // AddAfter with the key's next backoff delay; counts a failure.
  void AddRateLimited(const std::string& key);
  // Resets the key's failure count (it succeeded, or was dropped).
  void Forget(const std::string& key);
  // The delay the key's next AddRateLimited would use, before jitter.
  std::chrono::nanoseconds NextBackoff(const std::string& key) const;

  // The next due key, waiting for one; nullopt once shut down.
  std::optional<std::string> Get();
  // The next due key, or nullopt at once when none is due.
  std::optional<std::string> TryGet();
  // The worker finished the key it got.
  void Done(const std::string& key);

  void ShutDown();
  // Keys due now (queued), and keys waiting for their time.
  size_t Len() const;
  size_t Waiting() const;

 private:
  void AddLocked(const std::string& key);
  // Queues the waiting keys whose time has come; returns the earliest time still ahead.
  std::optional<Clock::Monotonic> PromoteLocked();
  std::optional<std::string> PopLocked();

  const Clock& clock_;
  const WorkQueueOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::set<std::string> dirty_;       // queued, or to be queued again when Done
  std::set<std::string> processing_;  // handed to a worker, not yet Done
  std::map<std::string, Clock::Monotonic> waiting_;         // key -> when it is due
  std::set<std::pair<Clock::Monotonic, std::string>> due_;  // the same, by time
  std::map<std::string, int> failures_;
  std::mt19937 random_;
  uint64_t generation_ = 0;  // bumped when a waiter must look at its deadline again
  bool shutting_down_ = false;
};

}  // namespace kmodd::server

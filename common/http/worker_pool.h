#pragma once

// The threads of common/http's server that run the handlers which may take long (the
// webhook's admission reviews), off its I/O thread. Jobs whose body is large run only on the
// first `workers - 1` of them (on the only one when there is one), so that a client sending
// 3 MiB bodies always leaves a thread for the ordinary review of a few KiB, and so that the
// memory a large review leaves with the allocator (some 150 MiB for 3 MiB of JSON) is kept
// by those threads only. Among jobs of one size, clients (peers) take turns; a thread that
// may take either size alternates when both wait, so neither starves.

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/http/fair_queue.h"

namespace kmodd::http {

class WorkerPool {
 public:
  using Job = std::function<void()>;

  WorkerPool() = default;
  ~WorkerPool() { Stop(); }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Starts `workers` threads (at least one). Unavailable when a thread cannot start.
  [[nodiscard]] absl::Status Start(int workers);

  // Runs `job` on a worker. A job must not throw; one that does is dropped, and the thread
  // goes on.
  void Submit(const std::string& peer, bool large, Job job);

  // Joins the workers after the jobs they are running; jobs still queued are destroyed
  // unrun, here. Idempotent.
  void Stop();

  struct Counts {
    size_t queued = 0;
    int running = 0;
    int running_large = 0;
  };
  Counts counts() const;

 private:
  void Work(bool may_large);

  int max_large_ = 1;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  FairQueue<Job> small_;  // guarded by mu_
  FairQueue<Job> large_;  // guarded by mu_
  int running_ = 0;        // guarded by mu_
  int running_large_ = 0;  // guarded by mu_; at most max_large_, one per such thread
  bool large_turn_ = false;  // guarded by mu_: whose turn when both sizes wait
  bool stop_ = false;        // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace kmodd::http

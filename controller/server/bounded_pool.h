#pragma once

// A fixed set of threads for the blocking work an agent's hello may need (a TokenReview is
// a call to the API server, never made on gRPC's callback threads), with a bounded queue:
// when every worker is busy and the queue is full, TrySubmit says no and the stream is
// refused with UNAVAILABLE, so a client opening streams as fast as it can costs at most
// `workers` API calls in flight and `queue` waiting ones, never a thread per stream.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kmodd::server {

class BoundedPool {
 public:
  BoundedPool(int workers, int queue);
  // Runs what is queued, then joins the workers.
  ~BoundedPool();
  BoundedPool(const BoundedPool&) = delete;
  BoundedPool& operator=(const BoundedPool&) = delete;

  // False when the queue is full (or the pool is stopping): `work` is not run.
  [[nodiscard]] bool TrySubmit(std::function<void()> work);

  int queued() const;

 private:
  void Run();

  const size_t max_queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool stop_ = false;                        // guarded by mu_
  size_t busy_ = 0;                          // guarded by mu_: workers running work
  std::vector<std::thread> threads_;
};

}  // namespace kmodd::server

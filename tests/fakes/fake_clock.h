#pragma once

// A Clock (common/clock.h) for tests: time moves only when the test says so, and a thread
// waiting on the clock wakes when Advance reaches its deadline. Thread-safe.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <list>
#include <mutex>

#include "absl/time/time.h"
#include "common/clock.h"

namespace kmodd {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1700000000)) : start_(start) {}

  absl::Time Now() const override { return start_ + absl::Nanoseconds(elapsed_ns_.load()); }
  Monotonic MonotonicNow() const override {
    return Monotonic{} + std::chrono::hours(1) + std::chrono::nanoseconds(elapsed_ns_.load());
  }
  bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 Monotonic deadline, const std::function<bool()>& done) const override;

  // Moves both readings forward by `d` and wakes every waiter, which looks at its deadline
  // again. Never call it while holding a mutex that a waiter on this clock waits with.
  void Advance(absl::Duration d);
  void Advance(std::chrono::nanoseconds d) { Advance(absl::FromChrono(d)); }

  // Blocks (in real time, up to `timeout`) until at least `n` threads wait on this clock:
  // a test advances time once the code under test is waiting for it. False on timeout.
  bool AwaitWaiters(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  size_t waiters() const;

 private:
  struct Waiter {
    std::mutex* mu;
    std::condition_variable* cv;
  };

  const absl::Time start_;
  std::atomic<int64_t> elapsed_ns_{0};
  // Guards waiters_. Lock order: mu_, then a waiter's mutex (Advance); a waiter holds
  // neither while it registers or unregisters.
  mutable std::mutex mu_;
  mutable std::condition_variable waiters_changed_;
  mutable std::list<Waiter> waiters_;
};

}  // namespace kmodd

#pragma once

// The one time source (Envoy's TimeSource): every component that reads the time, waits or
// times out takes a `const Clock&`, so that its timing logic is tested with FakeClock
// (tests/fakes/fake_clock.h) without real sleeps. Only main() builds a RealClock.
//
// Two readings, as Envoy has: wall-clock time (timestamps, leases, token expiries) and
// monotonic time (intervals, deadlines, backoff), which never jumps with the wall clock.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace kmodd {

class Clock {
 public:
  using Monotonic = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;

  // Wall-clock time.
  virtual absl::Time Now() const = 0;
  // Monotonic time, for deadlines and intervals.
  virtual Monotonic MonotonicNow() const = 0;

  // Waits on `cv` (`lock` held, as for std::condition_variable) until `done()` is true or
  // `deadline` has come on this clock; returns done(). Whoever makes done() true notifies
  // `cv` as usual; the clock wakes the waiter when time reaches the deadline.
  virtual bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                         Monotonic deadline, const std::function<bool()>& done) const = 0;

  bool WaitFor(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
               std::chrono::nanoseconds d, const std::function<bool()>& done) const {
    return WaitUntil(lock, cv, MonotonicNow() + d, done);
  }
  // Blocks the calling thread for `d` of this clock's time.
  void SleepFor(std::chrono::nanoseconds d) const;
};

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  Monotonic MonotonicNow() const override { return std::chrono::steady_clock::now(); }
  bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 Monotonic deadline, const std::function<bool()>& done) const override {
    return cv.wait_until(lock, deadline, done);
  }
};

}  // namespace kmodd

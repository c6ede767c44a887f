#pragma once

#include <mutex>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace kmodd::kube {

// Wall-clock time for leases, events and token refresh: injectable so that the leader
// election state machine is tested without waiting.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

// Time moves only when a test says so. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1700000000)) : now_(start) {}
  absl::Time Now() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    std::lock_guard<std::mutex> lock(mu_);
    now_ += d;
  }

 private:
  mutable std::mutex mu_;
  absl::Time now_;
};

}  // namespace kmodd::kube

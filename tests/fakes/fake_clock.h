#pragma once

// A Clock for tests (controller/kube/clock.h): time moves only when the test says so.

#include <mutex>

#include "absl/time/time.h"
#include "controller/kube/clock.h"

namespace kmodd::kube {

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

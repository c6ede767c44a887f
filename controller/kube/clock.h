#pragma once

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

}  // namespace kmodd::kube

#pragma once

// Capped, jittered exponential backoff. Pure: the caller supplies the random number, so
// tests pin it; the daemon feeds a seeded generator.

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace kmodd::agent {

struct BackoffPolicy {
  std::chrono::milliseconds initial{100};
  std::chrono::milliseconds max{30000};
};

// The delay before retry number `attempt` (0 = the first retry): initial * 2^attempt,
// capped at max, then jittered into [d/2, d) by `unit` in [0, 1). Half the delay stays
// fixed so that a fleet that lost its controller at once does not come back at once, yet
// no agent retries sooner than half its due time.
inline std::chrono::milliseconds BackoffDelay(const BackoffPolicy& p, int attempt, double unit) {
  const int64_t initial = std::max<int64_t>(1, p.initial.count());
  const int64_t cap = std::max<int64_t>(initial, p.max.count());
  int64_t d = initial;
  for (int i = 0; i < attempt && d < cap; ++i) {
    d *= 2;
  }
  d = std::min(d, cap);
  unit = std::clamp(unit, 0.0, 1.0);
  const auto half = static_cast<double>(d) / 2;
  return std::chrono::milliseconds(static_cast<int64_t>(half + half * unit));
}

// The attempt counter of one retried thing.
class Backoff {
 public:
  explicit Backoff(BackoffPolicy policy) : policy_(policy) {}
  std::chrono::milliseconds Next(double unit) { return BackoffDelay(policy_, attempt_++, unit); }
  void Reset() { attempt_ = 0; }
  int attempts() const { return attempt_; }

 private:
  BackoffPolicy policy_;
  int attempt_ = 0;
};

}  // namespace kmodd::agent

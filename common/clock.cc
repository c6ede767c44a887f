#include "common/clock.h"

namespace kmodd {

void Clock::SleepFor(std::chrono::nanoseconds d) const {
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock lock(mu);
  WaitFor(lock, cv, d, [] { return false; });
}

}  // namespace kmodd

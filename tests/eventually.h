#pragma once

// Waiting, in a test, for what another thread does: REQUIRE(Eventually([&] { ... })).

#include <chrono>
#include <functional>
#include <thread>

namespace kmodd::testing {

// Polls `done` every 5 ms until it holds (true) or `timeout` passes (false, after one last
// look). The default is generous: it bounds a failing test, never a passing one, so a
// loaded CI machine does not turn a slow pass into a failure.
inline bool Eventually(const std::function<bool()>& done,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return done();
}

}  // namespace kmodd::testing

#include "common/clock.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "tests/fakes/fake_clock.h"

namespace kmodd {
namespace {

using std::chrono::seconds;

TEST_CASE("fake clock wakes a waiter when time reaches its deadline, not before") {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  bool woke = false;
  bool result = true;
  std::thread waiter([&] {
    std::unique_lock lock(mu);
    result = clock.WaitFor(lock, cv, seconds(30), [] { return false; });
    woke = true;
  });
  REQUIRE(clock.AwaitWaiters(1));
  clock.Advance(seconds(29));
  {
    std::lock_guard lock(mu);
    CHECK_FALSE(woke);  // Advance returns after the waiter looked at the time again
  }
  clock.Advance(seconds(1));
  waiter.join();
  CHECK(woke);
  CHECK_FALSE(result);
  CHECK(clock.waiters() == 0);
}

TEST_CASE("fake clock waiter returns at once when its condition becomes true") {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool result = false;
  std::thread waiter([&] {
    std::unique_lock lock(mu);
    result = clock.WaitFor(lock, cv, seconds(30), [&] { return done; });
  });
  REQUIRE(clock.AwaitWaiters(1));
  {
    std::lock_guard lock(mu);
    done = true;
  }
  cv.notify_all();
  waiter.join();
  CHECK(result);
  CHECK(clock.MonotonicNow() - FakeClock().MonotonicNow() == seconds(0));  // no time passed
}

TEST_CASE("fake clock moves wall and monotonic time together, and SleepFor waits for it") {
  FakeClock clock(absl::FromUnixSeconds(1000));
  const Clock::Monotonic m0 = clock.MonotonicNow();
  std::thread sleeper([&] { clock.SleepFor(seconds(5)); });
  REQUIRE(clock.AwaitWaiters(1));
  clock.Advance(absl::Seconds(5));
  sleeper.join();
  CHECK(clock.Now() == absl::FromUnixSeconds(1005));
  CHECK(clock.MonotonicNow() - m0 == seconds(5));
}

TEST_CASE("real clock waits on the condition variable up to the deadline") {
  RealClock clock;
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock lock(mu);
  const Clock::Monotonic before = clock.MonotonicNow();
  CHECK_FALSE(clock.WaitFor(lock, cv, std::chrono::milliseconds(20), [] { return false; }));
  CHECK(clock.MonotonicNow() - before >= std::chrono::milliseconds(20));
  CHECK(clock.WaitFor(lock, cv, seconds(10), [] { return true; }));
}

}  // namespace
}  // namespace kmodd

#include "controller/server/bounded_pool.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <stdexcept>

namespace kmodd::server {
namespace {

// A gate the work waits at until the test opens it.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int waiting = 0;
  void Wait() {
    std::unique_lock lock(mu);
    ++waiting;
    cv.notify_all();
    cv.wait(lock, [this] { return open; });
  }
  void AwaitWaiting(int n) {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return waiting >= n; });
  }
  void Open() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
};

TEST_CASE("bounded pool takes as much work as it has idle workers and queue, no more") {
  Gate gate;
  std::atomic<int> done{0};
  {
    BoundedPool pool(2, 1);
    auto work = [&] {
      gate.Wait();
      ++done;
    };
    CHECK(pool.TrySubmit(work));
    CHECK(pool.TrySubmit(work));
    gate.AwaitWaiting(2);  // both workers busy
    CHECK(pool.TrySubmit(work));  // queued
    CHECK(pool.queued() == 1);
    CHECK_FALSE(pool.TrySubmit(work));
    gate.Open();
  }  // the destructor runs what was queued, then joins
  CHECK(done == 3);
}

TEST_CASE("bounded pool: work that throws does not end its worker") {
  std::atomic<int> done{0};
  {
    BoundedPool pool(1, 4);
    CHECK(pool.TrySubmit([] { throw std::runtime_error("review exploded"); }));
    CHECK(pool.TrySubmit([&] { ++done; }));
  }
  CHECK(done == 1);
}

}  // namespace
}  // namespace kmodd::server

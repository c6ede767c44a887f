#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/http/fair_queue.h"
#include "common/http/server_limits.h"
#include "common/http/worker_pool.h"

namespace kmodd::http {
namespace {

std::vector<std::string> Drain(FairQueue<std::string>& q) {
  std::vector<std::string> out;
  while (std::optional<std::string> item = q.Pop()) {
    out.push_back(*item);
  }
  return out;
}

TEST_CASE("fair queue serves its keys in turn, each key's items in order") {
  FairQueue<std::string> q;
  for (const char* item : {"a1", "a2", "a3", "a4"}) {
    q.Push("a", item);
  }
  q.Push("b", "b1");
  q.Push("c", "c1");
  q.Push("b", "b2");
  CHECK(q.size() == 7);
  CHECK(q.keys() == 3);
  CHECK(*q.Front() == "a1");
  CHECK(Drain(q) == std::vector<std::string>{"a1", "b1", "c1", "a2", "b2", "a3", "a4"});
  CHECK(q.empty());
  CHECK(q.keys() == 0);  // a key with nothing waiting is forgotten
  CHECK(q.Front() == nullptr);
}

TEST_CASE("fair queue puts a key that comes back at the end of the turns") {
  FairQueue<std::string> q;
  q.Push("a", "a1");
  q.Push("b", "b1");
  CHECK(*q.Pop() == "a1");
  q.Push("a", "a2");
  q.Push("c", "c1");
  CHECK(Drain(q) == std::vector<std::string>{"b1", "a2", "c1"});
}

TEST_CASE("connection limiter caps connections in all and per peer, and slots give back") {
  ConnectionLimiter limiter(3, 2);
  std::optional<ConnectionLimiter::Slot> a1 = limiter.TryAcquire("a");
  std::optional<ConnectionLimiter::Slot> a2 = limiter.TryAcquire("a");
  CHECK(a1);
  CHECK(a2);
  CHECK_FALSE(limiter.TryAcquire("a"));  // per peer
  std::optional<ConnectionLimiter::Slot> b1 = limiter.TryAcquire("b");
  CHECK(b1);
  CHECK_FALSE(limiter.TryAcquire("c"));  // in all
  CHECK(limiter.connections() == 3);
  a1.reset();
  CHECK(limiter.connections() == 2);
  std::optional<ConnectionLimiter::Slot> c1 = limiter.TryAcquire("c");
  CHECK(c1);
  ConnectionLimiter::Slot moved = std::move(*c1);
  c1.reset();  // a moved-from slot gives back nothing
  CHECK(limiter.connections() == 3);
  moved.Release();
  moved.Release();
  CHECK(limiter.connections() == 2);
}

TEST_CASE("connection limiter waits until its last slot goes back, or gives up") {
  ConnectionLimiter limiter(3, 2);
  CHECK(limiter.WaitNone(std::chrono::milliseconds(0)));
  std::optional<ConnectionLimiter::Slot> a = limiter.TryAcquire("a");
  REQUIRE(a);
  CHECK_FALSE(limiter.WaitNone(std::chrono::milliseconds(50)));
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    a.reset();
  });
  CHECK(limiter.WaitNone(std::chrono::seconds(20)));
  release.join();
}

// Releases every lease; the grants that follow may add new ones to `leases`.
void ReleaseAll(std::vector<BodyBudget::Lease>& leases) {
  std::vector<BodyBudget::Lease> old = std::move(leases);
  leases.clear();
  old.clear();
}

TEST_CASE("body budget grants what fits, and waiting peers in turn as memory comes back") {
  BodyBudget budget(10);
  std::vector<std::string> granted;
  std::vector<BodyBudget::Lease> leases;
  auto ask = [&](const std::string& peer, const std::string& name, size_t bytes) {
    budget.Acquire(peer, bytes, [&, name](BodyBudget::Lease lease) {
      granted.push_back(name);
      leases.push_back(std::move(lease));
    });
  };
  ask("a", "a1", 6);
  ask("a", "a2", 6);  // does not fit: waits
  ask("a", "a3", 1);  // would fit, but a2 came first
  ask("b", "b1", 4);
  CHECK(granted == std::vector<std::string>{"a1"});
  CHECK(budget.waiting() == 3);
  leases[0].Release();  // 10 free: a2 (6), then b1 (4), b's turn before a's next
  CHECK(granted == std::vector<std::string>{"a1", "a2", "b1"});
  CHECK(budget.available() == 0);
  leases[1].Release();
  CHECK(granted == std::vector<std::string>{"a1", "a2", "b1", "a3"});
  CHECK(budget.available() == 5);
  ask("c", "c1", 100);  // more than the whole budget: gets all of it, once free
  CHECK(budget.waiting() == 1);
  ReleaseAll(leases);
  CHECK(granted.back() == "c1");
  CHECK(budget.available() == 0);
  budget.Close();
  ask("d", "d1", 1);  // closed: never granted
  ReleaseAll(leases);
  CHECK(granted.back() == "c1");
  CHECK(budget.available() == 10);
}

// Jobs that block until the test lets them go, recording what ran.
struct Latch {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::vector<std::string> started;

  WorkerPool::Job Job(const std::string& name, bool block) {
    return [this, name, block] {
      std::unique_lock lock(mu);
      started.push_back(name);
      cv.notify_all();
      if (block) {
        cv.wait_for(lock, std::chrono::seconds(30), [this] { return open; });
      }
    };
  }
  bool WaitStarted(size_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return started.size() >= n; });
  }
  void Open() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
};

TEST_CASE("worker pool runs large jobs on all but one of its threads") {
  WorkerPool pool;
  REQUIRE(pool.Start(3).ok());
  Latch latch;
  for (const char* name : {"L1", "L2", "L3"}) {
    pool.Submit("p", /*large=*/true, latch.Job(name, true));
  }
  REQUIRE(latch.WaitStarted(2));
  pool.Submit("q", /*large=*/false, latch.Job("s1", false));
  REQUIRE(latch.WaitStarted(3));
  {
    std::lock_guard lock(latch.mu);
    REQUIRE(latch.started.size() == 3);
    CHECK(latch.started[2] == "s1");  // L1 and L2 start in either order
  }
  CHECK(pool.counts().running_large == 2);
  CHECK(pool.counts().queued == 1);  // L3 waits for a large slot, not for a thread
  latch.Open();
  REQUIRE(latch.WaitStarted(4));
  pool.Stop();
  CHECK(pool.counts().running == 0);
}

TEST_CASE("worker pool with one thread runs large jobs on it, alternating sizes when both wait") {
  WorkerPool pool;
  REQUIRE(pool.Start(1).ok());
  Latch latch;
  pool.Submit("p", true, latch.Job("hold", true));
  REQUIRE(latch.WaitStarted(1));
  pool.Submit("p", true, latch.Job("L1", false));
  pool.Submit("p", true, latch.Job("L2", false));
  pool.Submit("q", false, latch.Job("s1", false));
  pool.Submit("q", false, latch.Job("s2", false));
  latch.Open();
  REQUIRE(latch.WaitStarted(5));
  std::lock_guard lock(latch.mu);
  // Neither size starves the other.
  CHECK(latch.started == std::vector<std::string>{"hold", "s1", "L1", "s2", "L2"});
}

TEST_CASE("worker pool drops queued jobs at Stop and survives a job that throws") {
  WorkerPool pool;
  REQUIRE(pool.Start(1).ok());
  Latch latch;
  pool.Submit("p", false, [] { throw std::runtime_error("boom"); });
  pool.Submit("p", false, latch.Job("after", false));
  REQUIRE(latch.WaitStarted(1));
  auto owned = std::make_shared<int>(1);
  pool.Submit("p", false, latch.Job("hold", true));
  REQUIRE(latch.WaitStarted(2));
  pool.Submit("p", false, [owned] {});
  CHECK(owned.use_count() == 2);
  latch.Open();
  pool.Stop();
  CHECK(owned.use_count() == 1);  // run or dropped, its captures are gone
  pool.Submit("p", false, [owned] {});
  CHECK(owned.use_count() == 1);  // after Stop: dropped at once
}

}  // namespace
}  // namespace kmodd::http

#include "controller/kube_mode/event_queue.h"

#include <catch2/catch.hpp>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tests/eventually.h"

using kmodd::server::EventQueue;
using kmodd::testing::Eventually;

TEST_CASE("event queue: jobs run in order off the caller's thread, a full queue drops, a throw is logged") {
  std::FILE* devnull = std::fopen("/dev/null", "w");
  kmodd::Logger log(devnull);
  {
    EventQueue q(log, /*max=*/2);
    q.Start();
    std::mutex mu;
    std::condition_variable cv;
    bool release = false;
    std::vector<int> ran;
    std::thread::id where;
    // The first job holds the thread: the caller goes on (what the label worker needs).
    CHECK(q.Post([&] {
      std::unique_lock lock(mu);
      where = std::this_thread::get_id();
      cv.wait(lock, [&] { return release; });
      ran.push_back(0);
    }));
    REQUIRE(Eventually([&] {
      std::lock_guard lock(mu);
      return where != std::thread::id();
    }));
    CHECK(q.Post([] { throw std::runtime_error("event refused"); }));
    CHECK(q.Post([&] {
      std::lock_guard lock(mu);
      ran.push_back(2);
    }));
    CHECK_FALSE(q.Post([&] { ran.push_back(3); }));  // two wait already
    CHECK(q.dropped() == 1);
    {
      std::lock_guard lock(mu);
      CHECK(where != std::this_thread::get_id());
      release = true;
    }
    cv.notify_all();
    q.Stop();  // runs what is queued first
    CHECK(ran == std::vector<int>{0, 2});
    // Stopped: inline.
    CHECK(q.Post([&] { ran.push_back(4); }));
    CHECK(ran == std::vector<int>{0, 2, 4});
  }
  std::fclose(devnull);
}

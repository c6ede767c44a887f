#include "controller/kube_mode/work_queue.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/fakes/fake_clock.h"

using kmodd::FakeClock;
using kmodd::server::WorkQueue;
using kmodd::server::WorkQueueOptions;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

WorkQueueOptions NoJitter() {
  WorkQueueOptions o;
  o.base_delay = milliseconds(100);
  o.max_delay = seconds(1);
  o.jitter = 0;
  return o;
}

// Every key TryGet hands out now, each marked Done.
std::vector<std::string> Drain(WorkQueue& q) {
  std::vector<std::string> out;
  while (std::optional<std::string> key = q.TryGet()) {
    out.push_back(*key);
    q.Done(*key);
  }
  return out;
}

}  // namespace

TEST_CASE("work queue: a key added while queued is handed out once, in first-added order") {
  FakeClock clock;
  WorkQueue q(clock, NoJitter());
  q.Add("node/a");
  q.Add("node/b");
  q.Add("node/a");
  CHECK(q.Len() == 2);
  CHECK(Drain(q) == std::vector<std::string>{"node/a", "node/b"});
  CHECK(Drain(q).empty());
}

TEST_CASE("work queue: a key added while a worker has it waits for Done, then comes once") {
  FakeClock clock;
  WorkQueue q(clock, NoJitter());
  q.Add("node/a");
  std::optional<std::string> first = q.TryGet();
  REQUIRE(first == "node/a");
  q.Add("node/a");
  q.Add("node/a");
  CHECK_FALSE(q.TryGet());  // not to a second worker while the first has it
  q.Done("node/a");
  CHECK(Drain(q) == std::vector<std::string>{"node/a"});
}

TEST_CASE("work queue: workers never process one key at the same time") {
  FakeClock clock;
  WorkQueue q(clock, NoJitter());
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  std::atomic<int> processed{0};
  std::vector<std::thread> workers;
  for (int i = 0; i < 4; ++i) {
    workers.emplace_back([&] {
      while (std::optional<std::string> key = q.Get()) {
        if (inside.fetch_add(1) != 0) {
          overlapped = true;
        }
        std::this_thread::yield();
        inside.fetch_sub(1);
        processed.fetch_add(1);
        q.Done(*key);
      }
    });
  }
  for (int i = 0; i < 2000; ++i) {
    q.Add("module/ns/a");
  }
  // Every Add after the last hand-out is coalesced into one more pass; wait for it to end.
  while (q.Len() != 0) {
    std::this_thread::yield();
  }
  q.ShutDown();
  for (auto& t : workers) {
    t.join();
  }
  CHECK_FALSE(overlapped);
  CHECK(processed.load() >= 1);
  CHECK(processed.load() <= 2000);
}

TEST_CASE("work queue: a failing key backs off exponentially on the clock, capped, until forgotten") {
  FakeClock clock;
  WorkQueue q(clock, NoJitter());
  std::vector<milliseconds> delays;
  for (int failure = 0; failure < 6; ++failure) {
    delays.push_back(std::chrono::duration_cast<milliseconds>(q.NextBackoff("node/a")));
    q.AddRateLimited("node/a");
    CHECK(q.Waiting() == 1);
    CHECK(Drain(q).empty());
    clock.Advance(delays.back() - milliseconds(1));
    CHECK(Drain(q).empty());  // not a moment early
    clock.Advance(milliseconds(1));
    CHECK(Drain(q) == std::vector<std::string>{"node/a"});
  }
  CHECK(delays == std::vector<milliseconds>{milliseconds(100), milliseconds(200),
                                            milliseconds(400), milliseconds(800), seconds(1),
                                            seconds(1)});
  q.Forget("node/a");
  CHECK(q.NextBackoff("node/a") == milliseconds(100));
  CHECK(q.NextBackoff("node/b") == milliseconds(100));  // per key
}

TEST_CASE("work queue: jitter only lengthens a backoff, by at most its fraction") {
  FakeClock clock;
  WorkQueueOptions o = NoJitter();
  o.jitter = 0.5;
  o.seed = 7;
  WorkQueue q(clock, o);
  q.AddRateLimited("node/a");
  clock.Advance(milliseconds(99));
  CHECK(Drain(q).empty());
  clock.Advance(milliseconds(51));
  CHECK(Drain(q) == std::vector<std::string>{"node/a"});
}

TEST_CASE("work queue: the earlier of two delays wins and an immediate add overrides a delay") {
  FakeClock clock;
  WorkQueue q(clock, NoJitter());
  q.AddAfter("node/a", seconds(30));
  q.AddAfter("node/a", seconds(10));
  q.AddAfter("node/a", seconds(60));
  clock.Advance(seconds(10));
  CHECK(Drain(q) == std::vector<std::string>{"node/a"});
  clock.Advance(seconds(60));
  CHECK(Drain(q).empty());  // the later ones were folded into the first

  q.AddAfter("node/b", seconds(30));
  q.Add("node/b");
  CHECK(Drain(q) == std::vector<std::string>{"node/b"});
  clock.Advance(seconds(30));
  CHECK(Drain(q).empty());
  CHECK(q.Waiting() == 0);
}

TEST_CASE("work queue: a worker waiting in Get wakes when a delayed key comes due on the clock") {
  FakeClock clock;
  WorkQueue q(clock, NoJitter());
  q.AddAfter("module/ns/a", seconds(5));
  std::optional<std::string> got;
  std::thread worker([&] { got = q.Get(); });
  REQUIRE(clock.AwaitWaiters(1));
  clock.Advance(seconds(5));
  worker.join();
  CHECK(got == "module/ns/a");
}

TEST_CASE("work queue: shutting down wakes every waiting worker and drops what is queued") {
  FakeClock clock;
  WorkQueue q(clock, NoJitter());
  std::vector<std::optional<std::string>> got(2, std::string("unset"));
  std::vector<std::thread> workers;
  for (size_t i = 0; i < got.size(); ++i) {
    workers.emplace_back([&, i] { got[i] = q.Get(); });
  }
  REQUIRE(clock.AwaitWaiters(2));
  q.ShutDown();
  for (auto& t : workers) {
    t.join();
  }
  CHECK(got == std::vector<std::optional<std::string>>{std::nullopt, std::nullopt});
  q.Add("node/a");
  CHECK_FALSE(q.TryGet());
  CHECK(q.Len() == 0);
}

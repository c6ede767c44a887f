#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "node-agent/server/agent_state.h"
#include "tests/fakes/fake_clock.h"

using kmodd::agent::AgentState;
using kmodd::api::Phase;
using kmodd::agent::ModuleStatus;

namespace {

ModuleStatus Status(const std::string& key, Phase phase, const std::string& message = "") {
  ModuleStatus s;
  s.key = key;
  s.phase = phase;
  s.message = message;
  return s;
}

}  // namespace

TEST_CASE("agent state keeps a phase's since time and bumps the generation only on change", "[server]") {
  kmodd::FakeClock clock(absl::FromUnixMillis(1000));
  AgentState state(clock, 16);
  state.SetModules({Status("a/x", Phase::kLoading)});
  const uint64_t g1 = state.Snapshot().generation;
  clock.Advance(absl::Milliseconds(1000));
  state.SetModules({Status("a/x", Phase::kLoading)});
  CHECK(state.Snapshot().generation == g1);
  state.SetModules({Status("a/x", Phase::kLoading, "step 2")});
  CHECK(state.Snapshot().generation > g1);
  CHECK(state.Snapshot().modules[0].since_unix_ms == 1000);
  CHECK(state.Snapshot().modules[0].updated_unix_ms == 2000);
  clock.Advance(absl::Milliseconds(1000));
  state.SetModules({Status("a/x", Phase::kLoaded)});
  CHECK(state.Snapshot().modules[0].since_unix_ms == 3000);
}

TEST_CASE("events are replayed from the ring and delivered live to subscribers", "[server]") {
  kmodd::FakeClock clock(absl::FromUnixMillis(1));
  AgentState state(clock, 2);
  state.SetModules({Status("a/x", Phase::kLoading)});
  state.SetModules({Status("a/x", Phase::kLoaded)});
  state.SetModules({Status("a/x", Phase::kFailed)});
  auto replay = state.Subscribe(true);
  auto live = state.Subscribe(false);
  auto got = replay->Next(clock.MonotonicNow());
  REQUIRE(got.size() == 2);  // the ring holds the last two
  CHECK(got[0].phase == Phase::kLoaded);
  CHECK(got[1].phase == Phase::kFailed);
  CHECK(live->Next(clock.MonotonicNow()).empty());
  state.AddEvent({0, "KernelChanged", "", "remove x", {}, 0, 0});
  auto now = live->Next(clock.MonotonicNow() + std::chrono::seconds(1));
  REQUIRE(now.size() == 1);
  CHECK(now[0].kind == "KernelChanged");
}

TEST_CASE("agent state's waits end at a change or at their deadline on the agent's clock",
          "[server]") {
  kmodd::FakeClock clock;
  AgentState state(clock);
  const uint64_t g0 = state.Snapshot().generation;
  // A change ends the wait before its deadline.
  std::atomic<uint64_t> got{g0};
  std::thread waiter([&] { got = state.WaitForChange(g0, clock.MonotonicNow() + std::chrono::seconds(1)); });
  REQUIRE(clock.AwaitWaiters(1));
  state.SetModules({Status("a/x", Phase::kLoading)});
  waiter.join();
  CHECK(got.load() > g0);
  // Without a change, only the clock ends it: at the deadline, not before.
  const uint64_t g1 = state.Snapshot().generation;
  std::atomic<bool> returned{false};
  std::thread idle([&] {
    got = state.WaitForChange(g1, clock.MonotonicNow() + std::chrono::seconds(1));
    returned = true;
  });
  REQUIRE(clock.AwaitWaiters(1));
  clock.Advance(std::chrono::milliseconds(999));
  CHECK_FALSE(returned.load());
  clock.Advance(std::chrono::milliseconds(1));
  idle.join();
  CHECK(got.load() == g1);
  // An event subscription's wait likewise.
  auto sub = state.Subscribe(false);
  std::vector<kmodd::agent::AgentEvent> events{{}};
  std::thread reader([&] { events = sub->Next(clock.MonotonicNow() + std::chrono::milliseconds(250)); });
  REQUIRE(clock.AwaitWaiters(1));
  clock.Advance(std::chrono::milliseconds(250));
  reader.join();
  CHECK(events.empty());
}

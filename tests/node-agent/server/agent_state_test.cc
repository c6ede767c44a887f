#include <catch2/catch.hpp>

#include "node-agent/server/agent_state.h"

using kmodd::server::AgentState;
using kmodd::server::ModulePhase;
using kmodd::server::ModuleStatus;

namespace {

ModuleStatus Status(const std::string& key, ModulePhase phase, const std::string& message = "") {
  ModuleStatus s;
  s.key = key;
  s.phase = phase;
  s.message = message;
  return s;
}

}  // namespace

TEST_CASE("agent state keeps a phase's since time and bumps the generation only on change", "[server]") {
  int64_t now = 1000;
  AgentState state(16, [&] { return now; });
  state.SetModules({Status("a/x", ModulePhase::kLoading)});
  const uint64_t g1 = state.Snapshot().generation;
  now = 2000;
  state.SetModules({Status("a/x", ModulePhase::kLoading)});
  CHECK(state.Snapshot().generation == g1);
  state.SetModules({Status("a/x", ModulePhase::kLoading, "step 2")});
  CHECK(state.Snapshot().generation > g1);
  CHECK(state.Snapshot().modules[0].since_unix_ms == 1000);
  CHECK(state.Snapshot().modules[0].updated_unix_ms == 2000);
  now = 3000;
  state.SetModules({Status("a/x", ModulePhase::kLoaded)});
  CHECK(state.Snapshot().modules[0].since_unix_ms == 3000);
}

TEST_CASE("events are replayed from the ring and delivered live to subscribers", "[server]") {
  AgentState state(2, [] { return int64_t{1}; });
  state.SetModules({Status("a/x", ModulePhase::kLoading)});
  state.SetModules({Status("a/x", ModulePhase::kLoaded)});
  state.SetModules({Status("a/x", ModulePhase::kFailed)});
  auto replay = state.Subscribe(true);
  auto live = state.Subscribe(false);
  auto got = replay->Next(std::chrono::steady_clock::now());
  REQUIRE(got.size() == 2);  // the ring holds the last two
  CHECK(got[0].phase == ModulePhase::kLoaded);
  CHECK(got[1].phase == ModulePhase::kFailed);
  CHECK(live->Next(std::chrono::steady_clock::now()).empty());
  state.AddEvent({0, "KernelChanged", "", "remove x", {}, 0, 0});
  auto now = live->Next(std::chrono::steady_clock::now() + std::chrono::seconds(1));
  REQUIRE(now.size() == 1);
  CHECK(now[0].kind == "KernelChanged");
}

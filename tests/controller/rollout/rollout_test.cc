// The rollout planner (controller/rollout/rollout.h): tables of situations and what may run
// the new revision in each; a simulated fleet stepped through a whole rollout.

#include "controller/rollout/rollout.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

using kmodd::rollout::Amount;
using kmodd::rollout::Input;
using kmodd::rollout::NodeInput;
using kmodd::rollout::Output;
using kmodd::rollout::Phase;
using kmodd::rollout::Plan;
using kmodd::rollout::Progress;

namespace {

// Nodes n0..n(count-1), given out of order, none started.
std::vector<NodeInput> Nodes(int count) {
  std::vector<NodeInput> out;
  for (int i = count - 1; i >= 0; --i) {
    out.push_back(NodeInput{absl::StrCat("n", i), {}, Progress::kNotStarted, 0});
  }
  return out;
}

void Set(Input& in, const std::string& name, Progress p, int64_t ready_since_ms = 0) {
  for (NodeInput& n : in.nodes) {
    if (n.name == name) {
      n.progress = p;
      n.ready_since_ms = ready_since_ms;
    }
  }
}

std::set<std::string> Names(std::initializer_list<const char*> names) {
  return {names.begin(), names.end()};
}

}  // namespace

TEST_CASE("rollout: amounts as steps round up - as budgets down") {
  CHECK(Amount{3, {}}.Step(100) == 3);
  CHECK(Amount{0, 10}.Step(25) == 3);
  CHECK(Amount{0, 10}.Step(5) == 1);  // a percentage of a few nodes still moves
  CHECK(Amount{0, 0}.Step(5) == 0);
  CHECK(Amount{0, 100}.Step(7) == 7);
  CHECK(Amount{0, 10}.Budget(25) == 2);
  CHECK(Amount{0, 10}.Budget(5) == 0);
  CHECK(Amount{1, {}}.Budget(5) == 1);
}

TEST_CASE("rollout: without a policy every node at once - as KMM") {
  Input in;
  in.nodes = Nodes(4);
  const Output out = Plan(in);
  CHECK(out.phase == Phase::kProgressing);
  CHECK(out.admitted == Names({"n0", "n1", "n2", "n3"}));
  CHECK(out.order == std::vector<std::string>{"n0", "n1", "n2", "n3"});
  for (const char* n : {"n0", "n1", "n2", "n3"}) {
    Set(in, n, Progress::kReady);
  }
  CHECK(Plan(in).phase == Phase::kComplete);
}

TEST_CASE("rollout: maxParallel bounds the nodes updating at once - in name order") {
  Input in;
  in.nodes = Nodes(5);
  in.policy.max_parallel = Amount{2, {}};
  Output out = Plan(in);
  CHECK(out.admitted == Names({"n0", "n1"}));
  CHECK(out.waiting == 3);
  Set(in, "n0", Progress::kUpdating);
  Set(in, "n1", Progress::kUpdating);
  CHECK(Plan(in).admitted == Names({"n0", "n1"}));
  Set(in, "n0", Progress::kReady);
  out = Plan(in);
  CHECK(out.admitted == Names({"n0", "n1", "n2"}));
  CHECK(out.updating == 1);
  CHECK(out.ready == 1);
}

TEST_CASE("rollout: canaries first: the rest after a person resumes - or after the soak") {
  Input in;
  in.nodes = Nodes(5);
  in.policy.canary = 1;
  in.policy.max_parallel = Amount{2, {}};
  Output out = Plan(in);
  CHECK(out.canaries == Names({"n0"}));
  CHECK(out.admitted == Names({"n0"}));  // the others wait for the canary
  Set(in, "n0", Progress::kUpdating);
  CHECK(Plan(in).admitted == Names({"n0"}));
  Set(in, "n0", Progress::kReady, 1000);
  out = Plan(in);
  CHECK(out.phase == Phase::kWaitingAfterCanary);
  CHECK(out.admitted == Names({"n0"}));
  CHECK_FALSE(out.recheck_at_ms.has_value());

  SECTION("a person resumes") {
    in.resumed = true;
    out = Plan(in);
    CHECK(out.phase == Phase::kProgressing);
    CHECK(out.admitted == Names({"n0", "n1", "n2"}));
  }
  SECTION("the soak ends") {
    in.policy.canary_soak_ms = 5000;
    in.now_ms = 3000;
    out = Plan(in);
    CHECK(out.phase == Phase::kWaitingAfterCanary);
    REQUIRE(out.recheck_at_ms.has_value());
    CHECK(*out.recheck_at_ms == 6000);
    in.now_ms = 6000;
    CHECK(Plan(in).admitted == Names({"n0", "n1", "n2"}));
  }
  SECTION("no pause after the canaries") {
    in.policy.pause_after_canary = false;
    CHECK(Plan(in).admitted == Names({"n0", "n1", "n2"}));
  }
}

TEST_CASE("rollout: canaries by label - taken before the others whatever their names") {
  Input in;
  in.nodes = Nodes(4);
  in.nodes[0].labels["canary"] = "yes";  // n3
  in.policy.canary_selector = {{"canary", "yes"}};
  const Output out = Plan(in);
  CHECK(out.canaries == Names({"n3"}));
  CHECK(out.order == std::vector<std::string>{"n3", "n0", "n1", "n2"});
  CHECK(out.admitted == Names({"n3"}));
}

TEST_CASE("rollout: over the failure budget it halts: nodes not started keep their driver") {
  Input in;
  in.nodes = Nodes(6);
  in.policy.max_parallel = Amount{3, {}};
  in.policy.max_failed = Amount{1, {}};
  Set(in, "n0", Progress::kFailed);
  Set(in, "n1", Progress::kReady);
  Set(in, "n2", Progress::kUpdating);
  Output out = Plan(in);
  CHECK(out.phase == Phase::kProgressing);  // one Failed: within the budget
  CHECK(out.rollback == Names({"n0"}));
  CHECK(out.admitted == Names({"n0", "n1", "n2", "n3", "n4"}));  // 2 more: n2 still updating
  Set(in, "n2", Progress::kFailed);
  out = Plan(in);
  CHECK(out.phase == Phase::kHalted);
  CHECK(out.admitted == Names({"n0", "n1", "n2"}));  // n3, n4 not started: not admitted now
  CHECK(out.rollback == Names({"n0", "n2"}));
  CHECK(out.waiting == 3);
  CHECK(out.message.find("halted") != std::string::npos);

  SECTION("left Failed for inspection when the policy says so") {
    in.policy.rollback = false;
    CHECK(Plan(in).rollback.empty());
  }
}

TEST_CASE("rollout: a canary that fails halts within the budget: the others are not started") {
  Input in;
  in.nodes = Nodes(5);
  in.policy.canary = 2;
  in.policy.max_failed = Amount{3, {}};
  Set(in, "n0", Progress::kFailed);
  Set(in, "n1", Progress::kReady);
  Output out = Plan(in);
  CHECK(out.phase == Phase::kHalted);
  CHECK(out.admitted == Names({"n0", "n1"}));
  CHECK(out.rollback == Names({"n0"}));
  CHECK(out.message.find("canary n0 Failed") != std::string::npos);
  in.resumed = true;  // resuming does not get past a failed canary
  CHECK(Plan(in).phase == Phase::kHalted);
}

TEST_CASE("rollout: a node whose agent is away is skipped - not waited for") {
  Input in;
  in.nodes = Nodes(3);
  in.policy.max_parallel = Amount{1, {}};
  for (NodeInput& n : in.nodes) {
    n.available = n.name != "n0";
  }
  const Output out = Plan(in);
  CHECK(out.admitted == Names({"n1"}));
  CHECK(out.waiting == 2);
}

TEST_CASE("rollout: paused admits nothing more") {
  Input in;
  in.nodes = Nodes(3);
  in.policy.max_parallel = Amount{1, {}};
  Set(in, "n0", Progress::kReady);
  in.paused = true;
  const Output out = Plan(in);
  CHECK(out.phase == Phase::kPaused);
  CHECK(out.admitted == Names({"n0"}));
}

TEST_CASE("rollout: a fleet stepped through: never more than maxParallel updating - every node in the end") {
  for (const int parallel : {1, 3, 7}) {
    INFO("maxParallel " << parallel);
    Input in;
    in.nodes = Nodes(20);
    in.policy.max_parallel = Amount{parallel, {}};
    in.policy.canary = 2;
    in.policy.pause_after_canary = false;
    std::vector<std::string> started;
    for (int round = 0; round < 100; ++round) {
      const Output out = Plan(in);
      if (out.phase == Phase::kComplete) {
        break;
      }
      // Each round, in the rollout's order: what was updating is Ready, what was admitted
      // starts updating.
      for (const std::string& name : out.order) {
        auto n = std::find_if(in.nodes.begin(), in.nodes.end(),
                              [&](const NodeInput& x) { return x.name == name; });
        REQUIRE(n != in.nodes.end());
        if (n->progress == Progress::kUpdating) {
          n->progress = Progress::kReady;
        } else if (n->progress == Progress::kNotStarted && out.admitted.count(name) != 0) {
          n->progress = Progress::kUpdating;
          started.push_back(name);
        }
      }
      const auto updating = std::count_if(in.nodes.begin(), in.nodes.end(), [](const NodeInput& n) {
        return n.progress == Progress::kUpdating;
      });
      CHECK(updating <= parallel);
    }
    CHECK(Plan(in).phase == Phase::kComplete);
    REQUIRE(started.size() == 20);
    // The canaries went first, then the others by name (names sort as strings).
    CHECK(started[0] == "n0");
    CHECK(started[1] == "n1");
    std::vector<std::string> rest(started.begin() + 2, started.end());
    CHECK(std::is_sorted(rest.begin(), rest.end()));
  }
}

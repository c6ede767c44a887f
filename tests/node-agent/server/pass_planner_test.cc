// The pass planner (node-agent/server/pass_planner.h) as a specification: what a pass works
// on, fail-static, and the retry gates, with time as an input.

#include <catch2/catch.hpp>

#include <cerrno>
#include <chrono>
#include <functional>

#include "node-agent/kernel/errors.h"
#include "node-agent/server/pass_planner.h"

using kmodd::api::NodeModuleSpec;
using kmodd::reconcile::Action;
using kmodd::agent::DesiredState;
using kmodd::agent::FailStatic;
using kmodd::agent::PassInputs;
using kmodd::agent::PassPlanner;
using kmodd::agent::RetryGates;
using std::chrono::milliseconds;

namespace {

NodeModuleSpec Spec(const std::string& key, const std::string& image = "r/a:1") {
  NodeModuleSpec s;
  s.namespace_ = key.substr(0, key.find('/'));
  s.name = key.substr(key.find('/') + 1);
  s.config.container_image = image;
  s.config.modprobe.module_name = "m";
  return s;
}

std::vector<std::string> Keys(const PassInputs& in) {
  std::vector<std::string> out;
  for (const auto& m : in.modules) {
    out.push_back(m.spec.Key());
  }
  return out;
}

const RetryGates::Time kT0 = RetryGates::Time{} + std::chrono::hours(1);

const absl::Status kBusy =
    kmodd::kernel::KernelError(kmodd::kernel::KernelOp::kInsert, EBUSY, "m");
const absl::Status kNotPermitted =
    kmodd::kernel::KernelError(kmodd::kernel::KernelOp::kInsert, EPERM, "m");

}  // namespace

TEST_CASE("a pass works on the desired state with the debugging overrides applied",
          "[server][pass_planner]") {
  struct Row {
    const char* what;
    std::function<void(PassPlanner&)> given;
    std::vector<std::string> modules;  // what the pass works on, in order
    bool authoritative;
    std::string source;
    std::vector<std::string> overrides;
  };
  const DesiredState desired{"v1", "controller", {Spec("ns/a"), Spec("ns/b")}, {}};
  const std::vector<Row> rows = {
      {"nothing yet", [](PassPlanner&) {}, {}, false, "", {}},
      {"the desired state", [&](PassPlanner& p) { p.SetDesired(desired); }, {"ns/a", "ns/b"}, true,
       "controller", {}},
      {"a load override without a desired state",
       [](PassPlanner& p) { (void)p.OverrideLoad(Spec("ns/x")); }, {"ns/x"}, false, "override",
       {"ns/x (load)"}},
      {"a load override replaces its Module's entry in place",
       [&](PassPlanner& p) {
         p.SetDesired(desired);
         (void)p.OverrideLoad(Spec("ns/a", "r/a:2"));
       },
       {"ns/a", "ns/b"}, true, "controller", {"ns/a (load)"}},
      {"a load override of another Module comes after the desired ones",
       [&](PassPlanner& p) {
         p.SetDesired(desired);
         (void)p.OverrideLoad(Spec("ns/0"));
       },
       {"ns/a", "ns/b", "ns/0"}, true, "controller", {"ns/0 (load)"}},
      {"an unload override leaves its Module out",
       [&](PassPlanner& p) {
         p.SetDesired(desired);
         (void)p.OverrideUnload("ns/a");
       },
       {"ns/b"}, true, "controller", {"ns/a (unload)"}},
      {"an unload override replaces a load override of the same Module",
       [&](PassPlanner& p) {
         (void)p.OverrideLoad(Spec("ns/x"));
         (void)p.OverrideUnload("ns/x");
       },
       {}, false, "override", {"ns/x (unload)"}},
      {"the next desired state drops every override",
       [&](PassPlanner& p) {
         (void)p.OverrideLoad(Spec("ns/x"));
         (void)p.OverrideUnload("ns/a");
         p.SetDesired(desired);
       },
       {"ns/a", "ns/b"}, true, "controller", {}},
  };
  for (const auto& row : rows) {
    SECTION(row.what) {
      PassPlanner planner({milliseconds(100), milliseconds(400)});
      row.given(planner);
      const PassInputs in = planner.TakeInputs();
      CHECK(Keys(in) == row.modules);
      CHECK(in.fail_static.authoritative == row.authoritative);
      CHECK(planner.Describe().source == row.source);
      CHECK(planner.Describe().overrides == row.overrides);
    }
  }
}

TEST_CASE("a load override's spec is the one a pass works on", "[server][pass_planner]") {
  PassPlanner planner({milliseconds(100), milliseconds(400)});
  planner.SetDesired({"v1", "controller", {Spec("ns/a", "r/a:1")}, {}});
  const std::string message = planner.OverrideLoad(Spec("ns/a", "r/a:2"));
  CHECK_THAT(message, Catch::Contains("next desired state"));
  const PassInputs in = planner.TakeInputs();
  REQUIRE(in.modules.size() == 1);
  CHECK(in.modules[0].spec.config.container_image == "r/a:2");
  CHECK(in.version == "v1");
}

TEST_CASE("each Module gets the pull secret its imageRepoSecret names, overrides too",
          "[server][pass_planner]") {
  NodeModuleSpec a = Spec("ns/a");
  a.image_repo_secret = kmodd::api::LocalObjectReference{"pull"};
  NodeModuleSpec b = Spec("ns/b");  // no secret
  NodeModuleSpec c = Spec("other/c");
  c.image_repo_secret = kmodd::api::LocalObjectReference{"pull"};  // not in its namespace
  NodeModuleSpec x = Spec("ns/x");
  x.image_repo_secret = kmodd::api::LocalObjectReference{"pull"};
  PassPlanner planner({milliseconds(100), milliseconds(400)});
  planner.SetDesired({"v1", "controller", {a, b, c}, {{"ns/pull", "{\"auths\":{}}"}}});
  (void)planner.OverrideLoad(x);
  const PassInputs in = planner.TakeInputs();
  REQUIRE(in.modules.size() == 4);
  CHECK(in.modules[0].pull_secret == "{\"auths\":{}}");
  CHECK(in.modules[1].pull_secret.empty());
  CHECK(in.modules[2].pull_secret.empty());
  CHECK(in.modules[3].pull_secret == "{\"auths\":{}}");
}

TEST_CASE("fail-static: without a desired state nothing is unloaded but what an override names",
          "[server][pass_planner]") {
  struct Row {
    const char* what;
    FailStatic fail_static;
    Action action;
    bool allowed;
  };
  const FailStatic none{false, {}};
  const FailStatic overridden{false, {"ns/a"}};
  const FailStatic known{true, {}};
  const Row rows[] = {
      {"no desired state: a load runs", none, {Action::Kind::kLoad, "ns/a", ""}, true},
      {"no desired state: an unload waits", none, {Action::Kind::kUnload, "ns/a", ""}, false},
      {"no desired state: an in-tree reload waits", none, {Action::Kind::kReloadInTree, "i915", ""},
       false},
      {"an unload override unloads its Module", overridden, {Action::Kind::kUnload, "ns/a", ""},
       true},
      {"an unload override unloads no other", overridden, {Action::Kind::kUnload, "ns/b", ""},
       false},
      {"an unload override reloads no in-tree module", overridden,
       {Action::Kind::kReloadInTree, "i915", ""}, false},
      {"a desired state: an unload runs", known, {Action::Kind::kUnload, "ns/a", ""}, true},
      {"a desired state: an in-tree reload runs", known, {Action::Kind::kReloadInTree, "i915", ""},
       true},
  };
  for (const auto& row : rows) {
    INFO(row.what);
    CHECK(row.fail_static.Allows(row.action) == row.allowed);
    if (row.action.kind == Action::Kind::kUnload) {
      // The status says the same: a Module that may not be unloaded is kept as it is.
      CHECK(row.fail_static.Keeps(row.action.key) == !row.allowed);
    }
  }
}

TEST_CASE("a pass plans the action planner's actions that fail-static allows, and names problems",
          "[server][pass_planner]") {
  kmodd::kernel::KernelState observed;
  observed.boot_id = "boot-1";
  kmodd::kernel::LoadedModule old_mod;
  old_mod.name = "old_mod";
  old_mod.taint = "O";
  observed.modules = {old_mod};
  kmodd::reconcile::Journal journal;
  journal.boot_id = "boot-1";
  journal.modules["ns/old"].phase = kmodd::api::Phase::kLoaded;
  journal.modules["ns/old"].loaded = {"old_mod"};
  journal.in_tree_removed = {{"i915", "i915", "ns/old"}};
  kmodd::reconcile::DesiredModule broken;
  broken.key = "ns/broken";
  broken.problem = absl::InvalidArgumentError("vermagic mismatch");

  const auto kept = kmodd::agent::PlanPass(FailStatic{false, {}}, {broken}, observed, journal);
  CHECK(kept.actions.empty());
  CHECK(kept.problems == std::vector<std::string>{"ns/broken: vermagic mismatch"});

  const auto unloads = kmodd::agent::PlanPass(FailStatic{true, {}}, {broken}, observed, journal);
  REQUIRE(unloads.actions.size() == 2);
  CHECK(unloads.actions[0] == Action{Action::Kind::kUnload, "ns/old", unloads.actions[0].why});
  CHECK(unloads.actions[1].kind == Action::Kind::kReloadInTree);
  CHECK(unloads.actions[1].key == "i915");
}

TEST_CASE("a failed action waits for its backoff, doubling up to the cap; success reopens it",
          "[server][pass_planner]") {
  PassPlanner planner({milliseconds(100), milliseconds(400)});
  planner.SetDesired({"v1", "controller", {Spec("ns/a")}, {}});
  (void)planner.TakeInputs();
  RetryGates& gates = planner.gates();
  CHECK(gates.Open("ns/a", kT0));
  CHECK_FALSE(gates.NextOpening(kT0));
  // unit 0 is the low end of the jitter: half of 100, 200, 400, 400 ms.
  auto t = kT0;
  for (const auto delay : {milliseconds(50), milliseconds(100), milliseconds(200), milliseconds(200)}) {
    planner.RecordResult("ns/a", kBusy, t, 0.0, false);
    CHECK_FALSE(gates.Open("ns/a", t + delay - milliseconds(1)));
    CHECK(gates.Open("ns/a", t + delay));
    CHECK(gates.NextOpening(t) == t + delay);
    CHECK(gates.RetryScheduled("ns/a"));
    CHECK(gates.LastError("ns/a") == kBusy);
    t += delay;
  }
  // Success starts afresh; the top of the jitter stays below the full first step (100 ms).
  planner.RecordResult("ns/a", absl::OkStatus(), t, 0.0, false);
  planner.RecordResult("ns/a", kBusy, t, 0.999, false);
  CHECK_FALSE(gates.Open("ns/a", t + milliseconds(98)));
  CHECK(gates.Open("ns/a", t + milliseconds(99)));
  planner.RecordResult("ns/a", absl::OkStatus(), t, 0.0, false);
  CHECK(gates.Open("ns/a", t));
  CHECK(gates.LastError("ns/a").ok());
  CHECK_FALSE(gates.RetryScheduled("ns/a"));
}

TEST_CASE("a pull the registry refuses is retried with backoff, not held as terminal",
          "[server][pass_planner]") {
  PassPlanner planner({milliseconds(1000), milliseconds(8000)});
  planner.SetDesired({"v1", "controller", {Spec("ns/a")}, {}});
  const absl::Status refused = absl::UnauthenticatedError(
      "registry 127.0.0.1:5000 refused the credentials of the pull secret (HTTP 401)");
  planner.RecordResult("ns/a", refused, kT0, 0.5, false);
  CHECK(planner.gates().RetryScheduled("ns/a"));
  CHECK_FALSE(planner.gates().Open("ns/a", kT0 + milliseconds(749)));
  CHECK(planner.gates().Open("ns/a", kT0 + milliseconds(750)));
  planner.RecordResult("ns/a", refused, kT0 + milliseconds(750), 0.5, false);
  CHECK_FALSE(planner.gates().Open("ns/a", kT0 + milliseconds(750 + 1499)));
  CHECK(planner.gates().Open("ns/a", kT0 + milliseconds(750 + 1500)));
}

TEST_CASE("a terminal failure waits for a change, not for time", "[server][pass_planner]") {
  struct Row {
    const char* what;
    std::function<void(PassPlanner&)> change;
    bool reopened;
  };
  const std::vector<Row> rows = {
      {"time alone", [](PassPlanner&) {}, false},
      {"the same spec again", [](PassPlanner& p) { p.SetDesired({"v2", "controller", {Spec("ns/a")}, {}}); },
       false},
      {"a new spec", [](PassPlanner& p) { p.SetDesired({"v2", "controller", {Spec("ns/a", "r/a:2")}, {}}); },
       true},
      {"a load override", [](PassPlanner& p) { (void)p.OverrideLoad(Spec("ns/a")); }, true},
      {"an unload override", [](PassPlanner& p) { (void)p.OverrideUnload("ns/a"); }, true},
  };
  for (const auto& row : rows) {
    SECTION(row.what) {
      PassPlanner planner({milliseconds(100), milliseconds(400)});
      planner.SetDesired({"v1", "controller", {Spec("ns/a")}, {}});
      (void)planner.TakeInputs();
      planner.RecordResult("ns/a", kNotPermitted, kT0, 0.0, false);
      CHECK_FALSE(planner.gates().RetryScheduled("ns/a"));
      CHECK_FALSE(planner.gates().NextOpening(kT0));
      row.change(planner);
      (void)planner.TakeInputs();
      CHECK(planner.gates().Open("ns/a", kT0 + std::chrono::hours(24)) == row.reopened);
      CHECK(planner.gates().LastError("ns/a").ok() == row.reopened);
    }
  }
}

TEST_CASE("a new desired state reopens failed in-tree reloads, not failed Modules",
          "[server][pass_planner]") {
  PassPlanner planner({milliseconds(100), milliseconds(400)});
  planner.SetDesired({"v1", "controller", {Spec("ns/a")}, {}});
  planner.RecordResult("i915", kNotPermitted, kT0, 0.0, true);
  planner.RecordResult("ns/a", kNotPermitted, kT0, 0.0, false);
  CHECK(planner.gates().LastError("i915").ok());  // a reload's error is no Module's
  CHECK_FALSE(planner.gates().Open("i915", kT0 + std::chrono::hours(1)));
  planner.SetDesired({"v2", "controller", {Spec("ns/a")}, {}});
  CHECK(planner.gates().Open("i915", kT0));
  CHECK_FALSE(planner.gates().Open("ns/a", kT0 + std::chrono::hours(1)));
}

TEST_CASE("a failed observation holds the pass for its retry time without an attempt",
          "[server][pass_planner]") {
  // NextOpening's argument is the start of the last pass.
  RetryGates gates({milliseconds(100), milliseconds(400)});
  gates.Hold("/observe", kT0 + std::chrono::seconds(1));
  CHECK(gates.NextOpening(kT0) == kT0 + std::chrono::seconds(1));
  // Already open when the last pass began: it wakes nobody (no spinning on a gate whose
  // action is no longer planned).
  CHECK_FALSE(gates.NextOpening(kT0 + std::chrono::seconds(1)));
  gates.Clear("/observe");
  CHECK_FALSE(gates.NextOpening(kT0));
}

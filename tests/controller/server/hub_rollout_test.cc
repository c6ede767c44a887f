// The hub's rollouts (hub_rollout.cc) with fake streams: a Module with a ModulePolicy
// reaches its nodes as the planner admits them; a node not admitted keeps the entry it was
// last sent; a node that fails is sent back the entry it last ran well.

#include <string>

#include "controller/server/hub.h"
#include "tests/controller/server/hub_fixtures.h"

namespace kmodd::testing {
namespace {

v1::NodeInfo Worker(const std::string& name) {
  v1::NodeInfo i;
  i.set_name(name);
  (*i.mutable_labels())["role"] = "worker";
  i.set_kernel_release("6.1.0-27-cloud-amd64");
  return i;
}

api::ModulePolicy Policy(int max_parallel) {
  api::ModulePolicy p;
  p.metadata.name = "drv-rollout";
  p.metadata.namespace_ = "demo";
  p.module_name = "drv";
  p.rollout.max_parallel = api::NodeAmount{max_parallel, {}};
  return p;
}

source::SourceUpdate Update(const std::string& image, std::optional<api::ModulePolicy> policy) {
  source::SourceUpdate u;
  u.changes.push_back({{MakeModule("drv", image)}, {}});
  if (policy) {
    u.policies = std::map<std::string, api::ModulePolicy>{{"demo/drv", *policy}};
  }
  return u;
}

// The image of demo/drv in the stream's last desired state; "" when it has none, "(none)"
// when nothing was sent.
std::string ImageSent(const FakeStream& s) {
  if (s.pushed.empty()) {
    return "(none)";
  }
  for (const auto& m : s.Last().modules()) {
    if (m.name() == "drv") {
      return m.container_image();
    }
  }
  return "";
}

// The node reports demo/drv in `phase` with `image`, answering the last desired state.
v1::NodeReport Reported(const FakeStream& s, v1::Phase phase, const std::string& image) {
  v1::NodeReport r;
  r.set_applied_version(s.Last().version());
  v1::ModuleStatus* m = r.add_modules();
  m->set_namespace_("demo");
  m->set_name("drv");
  m->set_phase(phase);
  m->set_image(image);
  m->set_desired_version(s.Last().version());
  m->set_since_unix_ms(1'000'000);
  return r;
}

// Nodes a and b (workers) say hello to a hub with demo/drv at r/drv:1 paced one node at a
// time.
void TwoNodes(HubHarness& h, FakeStream& a, FakeStream& b) {
  h.hub.ApplySource(Update("r/drv:1", Policy(1)));
  REQUIRE(h.hub.Hello(&a, Worker("a")).ok());
  REQUIRE(h.hub.Hello(&b, Worker("b")).ok());
}

TEST_CASE("hub rollout: maxParallel 1 - the others keep their entry - a failed node is rolled back") {
  HubHarness h;
  FakeStream a;
  FakeStream b;
  TwoNodes(h, a, b);
  CHECK(ImageSent(a) == "r/drv:1");  // admitted first (by name)
  // b is sent nothing before it says what it runs: sending without drv would unload it.
  CHECK(ImageSent(b) == "(none)");
  REQUIRE(h.hub.Report(&b, v1::NodeReport()).ok());  // runs nothing, as an agent says first
  CHECK(ImageSent(b).empty());       // its desired state, without drv: not its turn

  REQUIRE(h.hub.Report(&a, Reported(a, v1::LOADED, "r/drv:1")).ok());
  CHECK(ImageSent(b) == "r/drv:1");  // a is Ready: b's turn
  REQUIRE(h.hub.Report(&b, Reported(b, v1::LOADED, "r/drv:1")).ok());
  CHECK(h.hub.Rollouts().at("demo/drv").phase == "Complete");

  // A new image: a first; b keeps r/drv:1 while a updates.
  const size_t b_pushes = b.pushed.size();
  h.hub.ApplySource(Update("r/drv:2", std::nullopt));
  CHECK(ImageSent(a) == "r/drv:2");
  CHECK(ImageSent(b) == "r/drv:1");
  CHECK(b.pushed.size() >= b_pushes);
  server::RolloutState st = h.hub.Rollouts().at("demo/drv");
  CHECK(st.updating == 1);
  CHECK(st.waiting == 1);

  // a fails on it: sent back r/drv:1 (what it last ran well); b is started.
  REQUIRE(h.hub.Report(&a, Reported(a, v1::FAILED, "r/drv:2")).ok());
  CHECK(ImageSent(a) == "r/drv:1");
  CHECK(ImageSent(b) == "r/drv:2");
  st = h.hub.Rollouts().at("demo/drv");
  CHECK(st.failed == 1);
  REQUIRE(st.failed_nodes.size() == 1);
  CHECK(st.failed_nodes[0].starts_with("a: "));
  // a stays Failed (sticky) while it runs r/drv:1 again.
  REQUIRE(h.hub.Report(&a, Reported(a, v1::LOADED, "r/drv:1")).ok());
  st = h.hub.Rollouts().at("demo/drv");
  CHECK(st.failed == 1);
  CHECK(st.rolled_back == 1);
  CHECK(ImageSent(a) == "r/drv:1");
}

TEST_CASE("hub rollout: the policy's readiness checks go with every entry - Available is not Ready - a failed check rolls back") {
  HubHarness h;
  FakeStream a;
  FakeStream b;
  api::ModulePolicy p = Policy(1);
  api::ReadinessCheck version;
  version.name = "version";
  version.path = "/sys/module/drv/version";
  p.readiness = {version};
  h.hub.ApplySource(Update("r/drv:1", p));
  REQUIRE(h.hub.Hello(&a, Worker("a")).ok());
  REQUIRE(h.hub.Hello(&b, Worker("b")).ok());
  REQUIRE(h.hub.Report(&b, v1::NodeReport()).ok());
  auto checks_sent = [](const FakeStream& s) {
    for (const auto& m : s.Last().modules()) {
      if (m.name() == "drv") {
        return m.readiness_size() == 1 ? m.readiness(0).path() : std::string("(wrong count)");
      }
    }
    return std::string("(no drv)");
  };
  CHECK(checks_sent(a) == "/sys/module/drv/version");
  // Loaded with its checks running: Available, not Ready; b waits its turn.
  REQUIRE(h.hub.Report(&a, Reported(a, v1::AVAILABLE, "r/drv:1")).ok());
  CHECK(ImageSent(b).empty());
  CHECK(h.hub.Rollouts().at("demo/drv").updating == 1);
  REQUIRE(h.hub.Report(&a, Reported(a, v1::LOADED, "r/drv:1")).ok());
  CHECK(ImageSent(b) == "r/drv:1");
  CHECK(checks_sent(b) == "/sys/module/drv/version");
  REQUIRE(h.hub.Report(&b, Reported(b, v1::LOADED, "r/drv:1")).ok());
  CHECK(h.hub.Rollouts().at("demo/drv").phase == "Complete");

  // Only the checks change: every node is sent them, and the revision stays.
  const std::string revision = h.hub.Rollouts().at("demo/drv").revision;
  p.readiness[0].path = "/sys/module/drv/initstate";
  source::SourceUpdate u;
  u.policies = std::map<std::string, api::ModulePolicy>{{"demo/drv", p}};
  h.hub.ApplySource(u);
  CHECK(checks_sent(a) == "/sys/module/drv/initstate");
  CHECK(checks_sent(b) == "/sys/module/drv/initstate");
  CHECK(h.hub.Rollouts().at("demo/drv").revision == revision);

  // A new image whose check fails on a: a goes back to r/drv:1, the message kept.
  REQUIRE(h.hub.Report(&a, Reported(a, v1::LOADED, "r/drv:1")).ok());
  REQUIRE(h.hub.Report(&b, Reported(b, v1::LOADED, "r/drv:1")).ok());
  h.hub.ApplySource(Update("r/drv:2", std::nullopt));
  CHECK(ImageSent(a) == "r/drv:2");
  v1::NodeReport failed = Reported(a, v1::FAILED, "r/drv:2");
  failed.mutable_modules(0)->set_message(
      "readiness check \"version\" (path) failed: /sys/module/drv/initstate does not exist after 60 s");
  REQUIRE(h.hub.Report(&a, failed).ok());
  CHECK(ImageSent(a) == "r/drv:1");
  const server::RolloutState st = h.hub.Rollouts().at("demo/drv");
  REQUIRE(st.failed_nodes.size() == 1);
  CHECK_THAT(st.failed_nodes[0], Catch::Contains("readiness check \"version\""));

  // A new image and new checks in one change: the node is sent both.
  REQUIRE(h.hub.Report(&a, Reported(a, v1::LOADED, "r/drv:1")).ok());
  api::ReadinessCheck live = version;
  live.name = "live";
  live.path = "/sys/module/drv/initstate";
  p.readiness = {live, version};
  source::SourceUpdate both = Update("r/drv:3", p);
  h.hub.ApplySource(both);
  const FakeStream* started = ImageSent(a) == "r/drv:3" ? &a : &b;
  REQUIRE(ImageSent(*started) == "r/drv:3");
  int n = -1;
  for (const auto& m : started->Last().modules()) {
    n = m.readiness_size();
  }
  CHECK(n == 2);
}

// CI: the checks changed while the node was kept at its entry, and a report answering the
// earlier push (the checks it passed) came in before the agent had the new ones. The node
// then failed on a new image: it must go back with the checks it passed, not with checks it
// never ran (which failed it again, and it never counted as rolled back).
TEST_CASE("hub rollout: a report answering the earlier checks does not make the new checks the ones a failed node goes back to") {
  HubHarness h;
  FakeStream a;
  FakeStream b;
  api::ModulePolicy p = Policy(1);
  api::ReadinessCheck live;
  live.name = "live";
  live.path = "/sys/module/drv/initstate";
  p.readiness = {live};
  h.hub.ApplySource(Update("r/drv:1", p));
  REQUIRE(h.hub.Hello(&a, Worker("a")).ok());
  REQUIRE(h.hub.Hello(&b, Worker("b")).ok());
  REQUIRE(h.hub.Report(&b, v1::NodeReport()).ok());
  REQUIRE(h.hub.Report(&a, Reported(a, v1::LOADED, "r/drv:1")).ok());
  REQUIRE(h.hub.Report(&b, Reported(b, v1::LOADED, "r/drv:1")).ok());
  REQUIRE(h.hub.Rollouts().at("demo/drv").phase == "Complete");
  auto check_names = [](const FakeStream& s) {
    std::string names;
    for (const auto& m : s.Last().modules()) {
      for (const auto& c : m.readiness()) {
        names += c.name() + ";";
      }
    }
    return names;
  };
  CHECK(check_names(a) == "live;");

  // A check added: a is sent it; its report answering the earlier push comes in after.
  const v1::NodeReport stale = Reported(a, v1::LOADED, "r/drv:1");
  api::ReadinessCheck mode = live;
  mode.name = "mode";
  mode.path = "/sys/module/drv/parameters/mode";
  p.readiness = {live, mode};
  source::SourceUpdate checks;
  checks.policies = std::map<std::string, api::ModulePolicy>{{"demo/drv", p}};
  h.hub.ApplySource(checks);
  REQUIRE(check_names(a) == "live;mode;");
  REQUIRE(h.hub.Report(&a, stale).ok());

  // A new image, on which a fails: it goes back to r/drv:1 with the check it passed.
  h.hub.ApplySource(Update("r/drv:2", std::nullopt));
  REQUIRE(ImageSent(a) == "r/drv:2");
  REQUIRE(h.hub.Report(&a, Reported(a, v1::FAILED, "r/drv:2")).ok());
  CHECK(ImageSent(a) == "r/drv:1");
  CHECK(check_names(a) == "live;");
  REQUIRE(h.hub.Report(&a, Reported(a, v1::LOADED, "r/drv:1")).ok());
  CHECK(h.hub.Rollouts().at("demo/drv").rolled_back == 1);
}

TEST_CASE("hub rollout: undo sends every started node back - the waiting ones keep theirs") {
  HubHarness h;
  FakeStream a;
  FakeStream b;
  TwoNodes(h, a, b);
  REQUIRE(h.hub.Report(&b, v1::NodeReport()).ok());
  REQUIRE(h.hub.Report(&a, Reported(a, v1::LOADED, "r/drv:1")).ok());
  REQUIRE(h.hub.Report(&b, Reported(b, v1::LOADED, "r/drv:1")).ok());
  h.hub.ApplySource(Update("r/drv:2", std::nullopt));
  REQUIRE(h.hub.Report(&a, Reported(a, v1::LOADED, "r/drv:2")).ok());
  CHECK(ImageSent(b) == "r/drv:2");  // b started after a was Ready

  api::ModulePolicy undo = Policy(1);
  undo.metadata.annotations[api::kUndoRevisionAnnotation] = h.hub.Rollouts().at("demo/drv").revision;
  h.hub.SetPolicies({{"demo/drv", undo}});
  CHECK(h.hub.Rollouts().at("demo/drv").phase == "Undone");
  CHECK(ImageSent(a) == "r/drv:1");
  CHECK(ImageSent(b) == "r/drv:1");
}

TEST_CASE("hub rollout: a Module without a policy reaches every node at once") {
  HubHarness h;
  h.hub.ApplySource(Update("r/drv:1", std::nullopt));
  FakeStream a;
  FakeStream b;
  REQUIRE(h.hub.Hello(&a, Worker("a")).ok());
  REQUIRE(h.hub.Hello(&b, Worker("b")).ok());
  CHECK(ImageSent(a) == "r/drv:1");
  CHECK(ImageSent(b) == "r/drv:1");
  CHECK(h.hub.Rollouts().empty());
}

}  // namespace
}  // namespace kmodd::testing

namespace kmodd::testing {
namespace {

TEST_CASE("hub rollout: drain - the node keeps its driver until drained - released once Ready - a timed-out drain fails it") {
  std::vector<server::DrainRequest> drains;
  std::vector<std::string> released;
  server::HubOptions o{"run", std::chrono::minutes(10)};
  o.drain = [&](const server::DrainRequest& r) { drains.push_back(r); };
  o.undrain = [&](const std::string& node, const std::string& module) {
    released.push_back(node + " " + module);
  };
  HubHarness h(o);
  FakeStream a;
  api::ModulePolicy p = Policy(1);
  p.drain = api::DrainSpec{};
  p.drain->resources = {"kmodd.test/widget"};
  h.hub.ApplySource(Update("r/drv:1", p));
  REQUIRE(h.hub.Hello(&a, Worker("a")).ok());
  CHECK(ImageSent(a) == "r/drv:1");
  CHECK(drains.empty());  // nothing to replace: no drain for a first load
  REQUIRE(h.hub.Report(&a, Reported(a, v1::LOADED, "r/drv:1")).ok());

  h.hub.ApplySource(Update("r/drv:2", std::nullopt));
  REQUIRE(drains.size() == 1);
  CHECK(drains[0].node == "a");
  CHECK(drains[0].module == "demo/drv");
  CHECK(drains[0].spec.resources == std::vector<std::string>{"kmodd.test/widget"});
  CHECK(ImageSent(a) == "r/drv:1");  // kept while its device users leave
  h.hub.DrainDone("a", "demo/drv", "another target", true, "");  // a stale answer: ignored
  CHECK(ImageSent(a) == "r/drv:1");
  h.hub.DrainDone("a", "demo/drv", drains[0].target, true, "");
  CHECK(ImageSent(a) == "r/drv:2");
  CHECK(released.empty());
  REQUIRE(h.hub.Report(&a, Reported(a, v1::LOADED, "r/drv:2")).ok());
  CHECK(released == std::vector<std::string>{"a demo/drv"});
  CHECK(drains.size() == 1);

  // r/drv:3: the drain times out (onTimeout Fail): the node keeps r/drv:2 and is Failed.
  h.hub.ApplySource(Update("r/drv:3", std::nullopt));
  REQUIRE(drains.size() == 2);
  h.hub.DrainDone("a", "demo/drv", drains[1].target, false,
                  "drain timed out after 300 s: 1 Pod(s) still on the node: jobs/user");
  CHECK(ImageSent(a) == "r/drv:2");
  const server::RolloutState st = h.hub.Rollouts().at("demo/drv");
  REQUIRE(st.failed_nodes.size() == 1);
  CHECK(st.failed_nodes[0] == "a: drain timed out after 300 s: 1 Pod(s) still on the node: jobs/user");
}

}  // namespace
}  // namespace kmodd::testing

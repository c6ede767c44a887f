#include "controller/server/hub.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "api/decode.h"
#include "hub_fixtures.h"
#include "tests/fakes/fake_clock.h"

using kmodd::server::AgentStream;
using kmodd::server::Hub;
using kmodd::source::ModuleChanges;
using kmodd::source::SourceUpdate;
using kmodd::testing::FakeStream;
using kmodd::testing::MakeModule;

namespace {

SourceUpdate Set(kmodd::api::Module m) {
  SourceUpdate u;
  u.changes.push_back(ModuleChanges{{std::move(m)}, {}});
  return u;
}

kmodd::v1::NodeInfo Info(const std::string& name, bool worker) {
  kmodd::v1::NodeInfo i;
  i.set_name(name);
  i.set_kernel_release("6.1.0-27-cloud-amd64");
  i.set_boot_id("b1");
  if (worker) {
    (*i.mutable_labels())["role"] = "worker";
  }
  return i;
}

using Harness = kmodd::testing::HubHarness;

}  // namespace

TEST_CASE("hub sends each node its desired state on hello, then only to nodes that change") {
  Harness h;
  h.hub.ApplySource(Set(MakeModule("a", "r/a:1")));
  FakeStream w1, w2, other;
  REQUIRE(h.hub.Hello(&w1, Info("w1", true)).ok());
  REQUIRE(h.hub.Hello(&w2, Info("w2", true)).ok());
  REQUIRE(h.hub.Hello(&other, Info("other", false)).ok());
  REQUIRE(w1.pushed.size() == 1);
  CHECK(w1.Last().modules_size() == 1);
  CHECK(w1.Last().modules(0).container_image() == "r/a:1");
  CHECK(w1.Last().version().rfind("run-", 0) == 0);
  REQUIRE(other.pushed.size() == 1);
  CHECK(other.Last().modules_size() == 0);

  h.hub.ApplySource(Set(MakeModule("a", "r/a:2")));
  CHECK(w1.pushed.size() == 2);
  CHECK(w2.pushed.size() == 2);
  CHECK(other.pushed.size() == 1);
  CHECK(w1.Last().modules(0).container_image() == "r/a:2");
  CHECK(w1.Last().version() != w1.pushed[0]->version());
  CHECK(w1.Last().version() != w2.Last().version());
}

TEST_CASE("hub records ACKs, NACKs and the reported modules") {
  Harness h;
  h.hub.ApplySource(Set(MakeModule("a", "r/a:1")));
  FakeStream s;
  REQUIRE(h.hub.Hello(&s, Info("w1", true)).ok());
  kmodd::v1::NodeReport r;
  r.mutable_ack()->set_version(s.Last().version());
  r.mutable_ack()->set_accepted(true);
  auto* m = r.add_modules();
  m->set_namespace_("demo");
  m->set_name("a");
  m->set_phase(kmodd::v1::LOADED);
  REQUIRE(h.hub.Report(&s, r).ok());
  auto rec = h.hub.Node("w1");
  REQUIRE(rec);
  CHECK(rec->acked_version == s.Last().version());
  REQUIRE(rec->modules.size() == 1);
  CHECK(rec->modules[0].phase == kmodd::api::Phase::kLoaded);

  kmodd::v1::NodeReport nack;
  nack.mutable_ack()->set_version("run-99");
  nack.mutable_ack()->set_error("bad spec");
  REQUIRE(h.hub.Report(&s, nack).ok());
  rec = h.hub.Node("w1");
  CHECK(rec->nacked_version == "run-99");
  CHECK(rec->nack_error == "bad spec");
  CHECK(rec->acked_version == s.Last().version());
  CHECK(rec->modules.empty());  // every report is the full observed state
}

TEST_CASE("hub: a stream cannot switch to another node's name") {
  Harness h;
  h.hub.ApplySource({});
  FakeStream s;
  REQUIRE(h.hub.Hello(&s, Info("w1", true)).ok());
  kmodd::v1::NodeReport r;
  *r.mutable_node() = Info("w2", true);
  CHECK(h.hub.Report(&s, r).code() == absl::StatusCode::kPermissionDenied);
}

TEST_CASE("hub: a second stream for a node replaces the first, same version if unchanged") {
  Harness h;
  h.hub.ApplySource(Set(MakeModule("a", "r/a:1")));
  FakeStream first, second;
  REQUIRE(h.hub.Hello(&first, Info("w1", true)).ok());
  REQUIRE(h.hub.Hello(&second, Info("w1", true)).ok());
  REQUIRE(first.closed);
  CHECK(first.closed->code() == absl::StatusCode::kAborted);
  CHECK(second.Last().version() == first.Last().version());
  h.hub.Goodbye(&first);  // the replaced stream ending does not disconnect the node
  CHECK(h.hub.Node("w1")->connected);
  CHECK(h.hub.ConnectedCount() == 1);
}

TEST_CASE("hub keeps a disconnected node's plan until it has been gone for forget_after") {
  Harness h;
  h.hub.ApplySource(Set(MakeModule("a", "r/a:1")));
  FakeStream s;
  REQUIRE(h.hub.Hello(&s, Info("w1", true)).ok());
  h.hub.Goodbye(&s);
  auto rec = h.hub.Node("w1");
  REQUIRE(rec);
  CHECK_FALSE(rec->connected);
  CHECK(h.hub.Status().modules[0].module_loader.desired_number == 1);
  h.clock.Advance(absl::Minutes(9));
  CHECK(h.hub.ForgetGone() == 0);
  h.clock.Advance(absl::Minutes(2));
  CHECK(h.hub.ForgetGone() == 1);
  CHECK_FALSE(h.hub.Node("w1"));
  CHECK(h.hub.Status().modules[0].module_loader.desired_number == 0);
}

TEST_CASE("hub sends nothing until the Modules have once been read without errors") {
  Harness h;
  SourceUpdate broken = Set(MakeModule("a", "r/a:1"));
  broken.errors.push_back(kmodd::api::Diagnostic{"/d/b.yaml", 3, "Module demo/b", "spec", "bad"});
  h.hub.ApplySource(broken);
  FakeStream s;
  REQUIRE(h.hub.Hello(&s, Info("w1", true)).ok());
  CHECK(s.pushed.empty());  // the agent keeps what it runs: b may be one of them
  SourceUpdate fixed = Set(MakeModule("b", "r/b:1"));
  h.hub.ApplySource(fixed);
  REQUIRE(s.pushed.size() == 1);
  CHECK(s.Last().modules_size() == 2);
}

TEST_CASE("hub: a held Module holds back only the nodes that report it, until it is removed") {
  Harness h;
  // As KubeSource says it after a restart: b is rejected, an earlier run planned it.
  SourceUpdate start = Set(MakeModule("a", "r/a:1"));
  start.errors.push_back(kmodd::api::Diagnostic{"", 0, "Module demo/b", "spec", "bad"});
  start.errors_hold_all = false;
  start.held = {"demo/b"};
  h.hub.ApplySource(start);
  FakeStream runs_b;
  FakeStream other;
  kmodd::v1::NodeReport hello;
  *hello.mutable_node() = Info("w1", true);
  auto* b = hello.add_modules();
  b->set_namespace_("demo");
  b->set_name("b");
  b->set_phase(kmodd::v1::LOADED);
  REQUIRE(h.hub.Hello(&runs_b, hello.node()).ok());
  CHECK(runs_b.pushed.empty());  // what it runs is not known yet
  REQUIRE(h.hub.Report(&runs_b, hello).ok());
  CHECK(runs_b.pushed.empty());  // it runs b: a push would unload it
  hello.clear_modules();
  *hello.mutable_node() = Info("w2", true);
  REQUIRE(h.hub.Hello(&other, hello.node()).ok());
  CHECK(other.pushed.empty());
  REQUIRE(h.hub.Report(&other, hello).ok());
  REQUIRE(other.pushed.size() == 1);
  CHECK(other.Last().modules_size() == 1);
  CHECK(h.hub.Status().serving);

  // Deleted: nothing is held, and w1 is told to unload it (a is all it should run).
  SourceUpdate deleted;
  deleted.errors_hold_all = false;
  h.hub.ApplySource(deleted);
  REQUIRE(runs_b.pushed.size() == 1);
  CHECK(runs_b.Last().modules_size() == 1);
  CHECK(runs_b.Last().modules(0).name() == "a");
  CHECK(other.pushed.size() == 1);  // nothing changed for it
}

TEST_CASE("hub says which nodes changed since a change number; a reader too far behind gets all") {
  Harness h;
  h.hub.ApplySource(Set(MakeModule("a", "r/a:1")));
  const kmodd::server::HubChanges first = h.hub.WaitForChanges(0, std::chrono::nanoseconds(0));
  CHECK(first.all);  // a first reader knows nothing yet
  FakeStream w1, w2;
  REQUIRE(h.hub.Hello(&w1, Info("w1", true)).ok());
  REQUIRE(h.hub.Hello(&w2, Info("w2", true)).ok());
  const kmodd::server::HubChanges hello =
      h.hub.WaitForChanges(first.number, std::chrono::nanoseconds(0));
  CHECK_FALSE(hello.all);
  CHECK(hello.nodes == std::set<std::string>{"w1", "w2"});

  // A new Module version changes plans, not what a node reported: no node is named.
  h.hub.ApplySource(Set(MakeModule("a", "r/a:2")));
  const kmodd::server::HubChanges plan =
      h.hub.WaitForChanges(hello.number, std::chrono::nanoseconds(0));
  CHECK(plan.number > hello.number);
  CHECK(plan.nodes.empty());
  h.hub.Goodbye(&w2);
  REQUIRE(h.hub.Report(&w1, kmodd::v1::NodeReport{}).ok());
  const kmodd::server::HubChanges later =
      h.hub.WaitForChanges(plan.number, std::chrono::nanoseconds(0));
  CHECK(later.nodes == std::set<std::string>{"w1", "w2"});

  for (size_t i = 0; i <= Hub::kJournal; ++i) {
    REQUIRE(h.hub.Report(&w1, kmodd::v1::NodeReport{}).ok());
  }
  CHECK(h.hub.WaitForChanges(later.number, std::chrono::nanoseconds(0)).all);
}

TEST_CASE("hub: a wait for changes ends at its deadline on the injected clock") {
  Harness h;
  kmodd::FakeClock& clock = h.clock;
  const uint64_t now = h.hub.WaitForChanges(0, std::chrono::nanoseconds(0)).number;
  kmodd::server::HubChanges got;
  std::thread waiter([&] {
    got = h.hub.WaitForChanges(now, std::chrono::minutes(5));
  });
  REQUIRE(clock.AwaitWaiters(1));
  clock.Advance(std::chrono::minutes(5));
  waiter.join();
  CHECK(got.number == now);
  CHECK(got.nodes.empty());
}

// The drainer (kube_mode/drainer.h): which Pods a drain evicts (a table, hostile shapes
// included), and its work against a fake API: cordon with its mark, a node cordoned by
// someone else left alone and never uncordoned, evictions through the Eviction API, the
// end once no Pod is left, and a timeout naming what stayed.

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "controller/kube_mode/drainer.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/fake_kube_client.h"
#include "tests/must_parse.h"

using kmodd::source::DrainMatches;

namespace {

kmodd::api::DrainSpec Spec() {
  kmodd::api::DrainSpec s;
  s.resources = {"kmodd.test/widget"};
  s.pod_selector = {{"app", "trainer"}};
  s.timeout_seconds = 5;
  return s;
}

}  // namespace

TEST_CASE("drain: the Pods it evicts - by resource or labels - never a plugin or a finished Pod - hostile shapes left out") {
  struct Case {
    const char* what;
    const char* pod;
    bool evicted;
  };
  const Case cases[] = {
      {"requests the resource",
       R"({"metadata":{"name":"a","namespace":"n"},"spec":{"containers":[{"resources":{"requests":{"kmodd.test/widget":"1"}}}]}})",
       true},
      {"limits it only",
       R"({"metadata":{"name":"a","namespace":"n"},"spec":{"containers":[{"resources":{"limits":{"kmodd.test/widget":"1"}}}]}})",
       true},
      {"an init container requests it",
       R"({"metadata":{"name":"a","namespace":"n"},"spec":{"initContainers":[{"resources":{"requests":{"kmodd.test/widget":"1"}}}]}})",
       true},
      {"carries the labels",
       R"({"metadata":{"name":"a","namespace":"n","labels":{"app":"trainer","x":"y"}},"spec":{}})", true},
      {"another resource",
       R"({"metadata":{"name":"a","namespace":"n"},"spec":{"containers":[{"resources":{"requests":{"cpu":"1"}}}]}})",
       false},
      {"another label value", R"({"metadata":{"name":"a","namespace":"n","labels":{"app":"web"}}})", false},
      {"finished",
       R"({"metadata":{"name":"a","namespace":"n","labels":{"app":"trainer"}},"status":{"phase":"Succeeded"}})",
       false},
      {"the Module's own plugin",
       R"({"metadata":{"name":"a","namespace":"n","labels":{"app":"trainer","kmm.node.kubernetes.io/module.name":"m"}}})",
       false},
      {"no name", R"({"metadata":{"namespace":"n","labels":{"app":"trainer"}}})", false},
      {"metadata a list", R"({"metadata":[1,2]})", false},
      {"labels a string", R"({"metadata":{"name":"a","namespace":"n","labels":"app=trainer"}})", false},
      {"containers a map",
       R"({"metadata":{"name":"a","namespace":"n"},"spec":{"containers":{"c":{"resources":{"requests":{"kmodd.test/widget":"1"}}}}}})",
       false},
      {"resources a list",
       R"({"metadata":{"name":"a","namespace":"n"},"spec":{"containers":[{"resources":["kmodd.test/widget"]}]}})",
       false},
      {"not an object", R"("pod")", false},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    CHECK(DrainMatches(kmodd::testing::MustParse(c.pod), Spec()) == c.evicted);
  }
  kmodd::api::DrainSpec none;  // nothing named: nothing evicted (a cordon-only drain)
  CHECK_FALSE(DrainMatches(kmodd::testing::MustParse(
                               R"({"metadata":{"name":"a","namespace":"n","labels":{"app":"trainer"}}})"),
                           none));
}

TEST_CASE("drainer: cordons with its mark, evicts, ends when no Pod is left, uncordons only what it cordoned") {
  kmodd::kube::FakeKubeClient api;
  kmodd::FakeClock clock;
  std::FILE* devnull = std::fopen("/dev/null", "w");
  kmodd::Logger log(devnull);
  std::mutex mu;
  std::vector<std::pair<bool, std::string>> ends;
  kmodd::source::Drainer drainer(api, log, clock,
                                 [&](const kmodd::server::DrainRequest&, bool ok, const std::string& m) {
                                   std::lock_guard lock(mu);
                                   ends.emplace_back(ok, m);
                                 });
  REQUIRE(api.Create("/api/v1/nodes", kmodd::testing::MustParse(R"({"metadata":{"name":"n1"}})")).ok());
  REQUIRE(api.Create("/api/v1/nodes",
                     kmodd::testing::MustParse(R"({"metadata":{"name":"n2"},"spec":{"unschedulable":true}})"))
              .ok());
  REQUIRE(api.Create("/api/v1/pods",
                     kmodd::testing::MustParse(
                         R"({"metadata":{"name":"user","namespace":"jobs"},"spec":{"nodeName":"n1",)"
                         R"("containers":[{"resources":{"requests":{"kmodd.test/widget":"1"}}}]}})"))
              .ok());
  drainer.Start();
  auto ended = [&] {
    std::lock_guard lock(mu);
    return ends.size();
  };
  drainer.Request({"n1", "demo/m", "t1", Spec()});
  // Cordoned with the mark, and the Pod's eviction asked for.
  auto evicted = [&] {
    for (const std::string& c : api.calls()) {
      if (c == "POST /api/v1/namespaces/jobs/pods/user/eviction") {
        return true;
      }
    }
    return false;
  };
  for (int i = 0; i < 500 && !evicted(); ++i) {
    clock.Advance(std::chrono::milliseconds(100));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  REQUIRE(evicted());
  auto n1 = api.Get("/api/v1/nodes/n1");
  REQUIRE(n1.ok());
  CHECK(n1->Find("spec")->Find("unschedulable")->AsBool());
  CHECK(n1->Find("metadata")->Find("annotations")->Find("kmodd.io/cordoned-for")->AsString() == "demo/m");
  CHECK(ended() == 0);  // the Pod is still there (the fake does not act on evictions)
  REQUIRE(api.Delete("/api/v1/pods/user").ok());
  for (int i = 0; i < 500 && ended() == 0; ++i) {
    clock.Advance(std::chrono::milliseconds(100));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  REQUIRE(ended() == 1);
  CHECK(ends[0].first);

  // A node cordoned by someone else: left as it is, and not uncordoned on release.
  drainer.Request({"n2", "demo/m", "t2", Spec()});
  for (int i = 0; i < 500 && ended() == 1; ++i) {
    clock.Advance(std::chrono::milliseconds(100));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  REQUIRE(ended() == 2);
  drainer.Release("n2", "demo/m");
  drainer.Release("n1", "demo/m");
  auto uncordoned = [&] {
    auto n = api.Get("/api/v1/nodes/n1");
    const kmodd::Value* u = n.ok() ? n->Find("spec")->Find("unschedulable") : nullptr;
    return u == nullptr || u->IsNull() || !u->AsBool();
  };
  for (int i = 0; i < 500 && !uncordoned(); ++i) {
    clock.Advance(std::chrono::milliseconds(100));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  CHECK(uncordoned());
  auto n2 = api.Get("/api/v1/nodes/n2");
  REQUIRE(n2.ok());
  CHECK(n2->Find("spec")->Find("unschedulable")->AsBool());

  // A Pod that never leaves: the drain times out naming it.
  REQUIRE(api.Create("/api/v1/pods",
                     kmodd::testing::MustParse(
                         R"({"metadata":{"name":"stuck","namespace":"jobs","labels":{"app":"trainer"}},)"
                         R"("spec":{"nodeName":"n1"}})"))
              .ok());
  drainer.Request({"n1", "demo/m", "t3", Spec()});
  for (int i = 0; i < 1000 && ended() == 2; ++i) {
    clock.Advance(std::chrono::milliseconds(100));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  REQUIRE(ended() == 3);
  CHECK_FALSE(ends[2].first);
  CHECK(ends[2].second == "drain timed out after 5 s: 1 Pod(s) still on the node: jobs/stuck");
  drainer.Stop();
  std::fclose(devnull);
}

#include "controller/kube_mode/kube_writer.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "controller/kube/events.h"
#include "controller/server/hub.h"
#include "controller/kube_mode/kube_source.h"

#include "common/json.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/fake_kube_client.h"
#include "tests/eventually.h"

using kmodd::Value;
using kmodd::server::DesiredLabels;
using kmodd::server::FinalizerAction;
using kmodd::server::IsOwnedLabel;
using kmodd::server::LabelPatch;
using kmodd::server::Labels;
using kmodd::server::NextFinalizerAction;
using kmodd::server::NodeRecord;
using kmodd::server::ReportedModule;
using kmodd::source::ModuleMeta;

namespace {

NodeRecord Record(std::vector<ReportedModule> modules) {
  NodeRecord r;
  r.name = "w1";
  r.connected = true;
  r.kernel_release = "6.1.0-27-cloud-amd64";
  r.modules = std::move(modules);
  return r;
}

}  // namespace

TEST_CASE("kmodd owns the KMM ready, version-ready, plugin and kernel labels, and no others") {
  struct Row {
    const char* key;
    bool owned;
  };
  for (const Row& row : std::vector<Row>{
           {"kmm.node.kubernetes.io/ns.a.ready", true},
           {"kmm.node.kubernetes.io/ns.a.version.ready", true},
           // written by earlier kmodd releases: still removed, never written
           {"kmm.node.kubernetes.io/kernel-version.full", true},
           {"kmm.node.kubernetes.io/version-module.ns.a", false},  // the user's
           {"kmm.node.kubernetes.io/ns.a.device-plugin-ready", true},
           {"kmm.node.kubernetes.io/ns.a.dra-ready", true},
           {"kmm.node.kubernetes.io/ns.a.device-plugin-target", true},
           {"kmm.node.kubernetes.io/ns.a.dra-target", true},
           {"beta.kmm.node.kubernetes.io/version-schedule-pod.ns.a", true},
           {"beta.kmm.node.kubernetes.io/version-worker-pod.ns.a", false},  // KMM's, unused
           {"kmm.node.kubernetes.io/ns.a.dra-ready.x", false},
           {"example.com/ns.a.ready", false},
           {"role", false},
       }) {
    INFO(row.key);
    CHECK(IsOwnedLabel(row.key) == row.owned);
  }
}

TEST_CASE("a node is labelled ready only for the modules its agent reports Loaded") {
  const NodeRecord r = Record({{"ns/a", kmodd::api::Phase::kLoaded, "", "", "", 0},
                               {"ns/b", kmodd::api::Phase::kLoaded, "", "", "v2", 0},
                               {"ns/c", kmodd::api::Phase::kLoading, "", "", "", 0},
                               {"ns/d", kmodd::api::Phase::kFailed, "boom", "", "", 0}});
  CHECK(DesiredLabels(r) == Labels{
                                {"kmm.node.kubernetes.io/ns.a.ready", ""},
                                {"kmm.node.kubernetes.io/ns.b.ready", ""},
                                {"kmm.node.kubernetes.io/ns.b.version.ready", "v2"},
                            });
  CHECK(DesiredLabels(Record({})).empty());
}

TEST_CASE("a GKE node (kernel 6.1.90+) is labelled as any other: no kernel-version.full label") {
  // "+" is not valid in a label value, and KMM no longer writes this label at all.
  NodeRecord r = Record({{"ns/a", kmodd::api::Phase::kLoaded, "", "", "", 0}});
  r.kernel_release = "6.1.90+";
  CHECK(DesiredLabels(r) == Labels{{"kmm.node.kubernetes.io/ns.a.ready", ""}});
  // The label an earlier kmodd wrote goes with the next patch.
  std::optional<Value> p =
      LabelPatch({{"kmm.node.kubernetes.io/kernel-version.full", "6.1.0-27-cloud-amd64"},
                  {"kmm.node.kubernetes.io/ns.a.ready", ""}},
                 DesiredLabels(r));
  REQUIRE(p);
  CHECK(kmodd::ToJsonLine(*p) ==
        R"({"metadata":{"labels":{"kmm.node.kubernetes.io/kernel-version.full":null}}})");
}

TEST_CASE("the label patch adds, changes and removes only kmodd's labels") {
  const Labels current{{"role", "worker"},
                       {"kmm.node.kubernetes.io/version-module.ns.b", "v2"},
                       {"kmm.node.kubernetes.io/ns.old.ready", ""},
                       {"kmm.node.kubernetes.io/ns.b.version.ready", "v1"}};
  const Labels desired{{"kmm.node.kubernetes.io/ns.a.ready", ""},
                       {"kmm.node.kubernetes.io/ns.b.version.ready", "v2"}};
  std::optional<Value> p = LabelPatch(current, desired);
  REQUIRE(p);
  CHECK(kmodd::ToJsonLine(*p) ==
        R"({"metadata":{"labels":{"kmm.node.kubernetes.io/ns.old.ready":null,)"
        R"("kmm.node.kubernetes.io/ns.a.ready":"","kmm.node.kubernetes.io/ns.b.version.ready":"v2"}}})");
  Labels after = current;
  after.erase("kmm.node.kubernetes.io/ns.old.ready");
  after.insert(desired.begin(), desired.end());
  after["kmm.node.kubernetes.io/ns.b.version.ready"] = "v2";
  CHECK_FALSE(LabelPatch(after, desired));
}

TEST_CASE("the finalizer is added to every planned Module and removed once no connected agent reports it") {
  ModuleMeta fresh{"ns", "a", "u1", "5", {}, false, true};
  ModuleMeta held{"ns", "a", "u1", "6", {"other.io/x", "kmodd.io/unload"}, false, true};
  ModuleMeta deleting = held;
  deleting.deleting = true;
  ModuleMeta released{"ns", "a", "u1", "8", {"other.io/x"}, true, false};
  CHECK(NextFinalizerAction(fresh, false) == FinalizerAction::kAdd);
  CHECK(NextFinalizerAction(held, true) == FinalizerAction::kNone);
  CHECK(NextFinalizerAction(deleting, true) == FinalizerAction::kNone);
  CHECK(NextFinalizerAction(deleting, false) == FinalizerAction::kRemove);
  CHECK(NextFinalizerAction(released, false) == FinalizerAction::kNone);

  CHECK(kmodd::ToJsonLine(FinalizerPatch(fresh, FinalizerAction::kAdd)) ==
        R"({"metadata":{"finalizers":["kmodd.io/unload"],"resourceVersion":"5"}})");
  CHECK(kmodd::ToJsonLine(FinalizerPatch(deleting, FinalizerAction::kRemove)) ==
        R"({"metadata":{"finalizers":["other.io/x"],"resourceVersion":"6"}})");
}

TEST_CASE("a Module rejected before it was ever accepted is not held by the finalizer") {
  ModuleMeta rejected{"ns", "bad", "u1", "5", {}, false, false};
  CHECK(NextFinalizerAction(rejected, false) == FinalizerAction::kNone);
  // Accepted once, rejected since: its last accepted version runs, so it keeps the finalizer
  // and is unloaded on delete like any Module.
  ModuleMeta was_valid{"ns", "a", "u1", "6", {"kmodd.io/unload"}, false, true};
  CHECK(NextFinalizerAction(was_valid, true) == FinalizerAction::kNone);
  // Held from an earlier run, never accepted by this one: released on delete once no agent
  // reports it.
  ModuleMeta old{"ns", "a", "u1", "7", {"kmodd.io/unload"}, true, false};
  CHECK(NextFinalizerAction(old, false) == FinalizerAction::kRemove);
  CHECK(NextFinalizerAction(old, true) == FinalizerAction::kNone);
}

TEST_CASE("a finalizer patch computed from a stale Module is refused, not applied over a newer list") {
  kmodd::kube::FakeKubeClient api;
  const std::string coll = kmodd::kube::ResourcePath("kmm.sigs.x-k8s.io/v1beta1", "modules", "ns");
  auto created = api.Create(coll, Value(Value::Map{{"metadata", Value(Value::Map{{"name", "a"}})}}));
  REQUIRE(created.ok());
  ModuleMeta m{"ns", "a", "", kmodd::StringAt(*created, {"metadata", "resourceVersion"}), {}, false, true};
  const std::string path = coll + "/a";
  REQUIRE(api.MergePatch(path, FinalizerPatch(m, FinalizerAction::kAdd)).ok());
  // m is now stale: the same patch again is a conflict.
  CHECK(absl::IsAborted(api.MergePatch(path, FinalizerPatch(m, FinalizerAction::kAdd)).status()));
  auto now = api.Get(path);
  REQUIRE(now.ok());
  CHECK(kmodd::ToJsonLine(*kmodd::Lookup(*now, {"metadata", "finalizers"})) ==
        R"(["kmodd.io/unload"])");
}

namespace {

// For the sources of tests that wait for real watches.
const kmodd::Clock& RealClockRef() {
  static const kmodd::RealClock clock;
  return clock;
}

// Polls `done` every 10 ms for at most 10 s.
using kmodd::testing::Eventually;

// A stream the hub pushes to from the source's thread while the test reads it.
struct LockedStream : kmodd::server::AgentStream {
  void Push(std::shared_ptr<const kmodd::v1::NodeDesired> d) override {
    std::lock_guard lock(mu);
    pushed.push_back(std::move(d));
  }
  void Close(const absl::Status&) override {}
  // The module names of every push, "a,b" each.
  std::vector<std::string> Pushes() {
    std::lock_guard lock(mu);
    std::vector<std::string> out;
    for (const auto& d : pushed) {
      std::string names;
      for (const auto& m : d->modules()) {
        absl::StrAppend(&names, names.empty() ? "" : ",", m.name());
      }
      out.push_back(names);
    }
    return out;
  }
  std::mutex mu;
  std::vector<std::shared_ptr<const kmodd::v1::NodeDesired>> pushed;
};

// A Module in namespace ns for the workers; `extra` goes into metadata.
Value ModuleObject(const std::string& name, const std::string& regexp,
                   const std::string& extra = "") {
  auto m = kmodd::ParseJson(absl::StrCat(
      R"({"metadata":{"name":")", name, "\"", extra,
      R"(},"spec":{"selector":{"role":"worker"},"moduleLoader":{"container":{)",
      R"("modprobe":{"moduleName":"m"},"kernelMappings":[{"regexp":")", regexp,
      R"(","containerImage":"r/m:1"}]}}}})"));
  REQUIRE(m.ok());
  return *m;
}

void CreateWorker(kmodd::kube::FakeKubeClient& api, const std::string& name) {
  auto n = kmodd::ParseJson(absl::StrCat(
      R"({"metadata":{"name":")", name, R"(","labels":{"role":"worker"}},)",
      R"("status":{"nodeInfo":{"kernelVersion":"6.1.0-27-cloud-amd64","bootID":"b1",)",
      R"("architecture":"amd64"}}})"));
  REQUIRE(n.ok());
  REQUIRE(api.Create(kmodd::kube::ResourcePath("v1", "nodes"), *n).ok());
}

// An agent's hello: the node, and what it runs (Module ns/<name>, Loaded).
void Connect(kmodd::server::Hub& hub, LockedStream& s, const std::string& node,
             const std::vector<std::string>& running) {
  kmodd::v1::NodeReport hello;
  hello.mutable_node()->set_name(node);
  hello.mutable_node()->set_kernel_release("6.1.0-27-cloud-amd64");
  for (const std::string& name : running) {
    kmodd::v1::ModuleStatus* m = hello.add_modules();
    m->set_namespace_("ns");
    m->set_name(name);
    m->set_phase(kmodd::v1::LOADED);
  }
  REQUIRE(hub.Hello(&s, hello.node()).ok());  // as SyncServer does: Hello, then Report
  REQUIRE(hub.Report(&s, hello).ok());
}

std::string AcceptedMessage(kmodd::server::Hub& hub, const std::string& name) {
  for (const auto& m : hub.Status().modules) {
    for (const auto& c : m.conditions) {
      if (m.name == name && c.type == "Accepted") {
        return c.message;
      }
    }
  }
  return "";
}

std::string ConditionOf(const Value& module, const std::string& type, const char* field) {
  const Value* list = kmodd::Lookup(module, {"status", "conditions"});
  if (list == nullptr || !list->IsList()) {
    return "";
  }
  for (const Value& c : list->AsList()) {
    if (kmodd::StringAt(c, {"type"}) == type) {
      return kmodd::StringAt(c, {field});
    }
  }
  return "";
}

}  // namespace

TEST_CASE("Kubernetes mode: a Module rejected at start is in its status, unheld, and holds back nothing") {
  std::FILE* devnull = std::fopen("/dev/null", "w");
  kmodd::Logger log(devnull);
  kmodd::kube::FakeKubeClient api;
  const std::string modules = kmodd::kube::ResourcePath("kmm.sigs.x-k8s.io/v1beta1", "modules", "ns");
  auto module = [](const char* regexp) { return ModuleObject("bad", regexp); };
  // A restart: the API holds one valid Module and one never accepted (no finalizer).
  CreateWorker(api, "w1");
  REQUIRE(api.Create(modules, ModuleObject("good", "^6\\\\.1\\\\.")).ok());
  REQUIRE(api.Create(modules, module("^6\\\\.1\\\\.([")).ok());
  kmodd::server::HubOptions options{"run", std::chrono::minutes(10)};
  options.nodes_from_api = true;
  kmodd::FakeClock clock;  // the writer's and the hub's: the writer waits on the hub
  kmodd::server::Hub hub(options, clock, log);
  kmodd::source::KubeSource source(api, hub, clock, log);
  kmodd::kube::EventRecorder events(api, clock, "kmodd-controller", "test");
  kmodd::server::KubeWriter writer(api, hub, source, events, [] { return true; }, clock, log);
  source.Start();
  REQUIRE(Eventually([&] { return source.Synced(); }));

  // It reached no node, so it holds nothing back: the valid Module is sent.
  LockedStream w1;
  Connect(hub, w1, "w1", {});
  CHECK(w1.Pushes() == std::vector<std::string>{"good"});
  CHECK(AcceptedMessage(hub, "bad").find("not planned on any node until this is fixed") !=
        std::string::npos);
  writer.SyncOnce();
  // The status write changed the object: once the source has seen that, a second pass
  // works from the current resourceVersion, where a finalizer patch could not conflict.
  REQUIRE(Eventually([&] {
    auto now = api.Get(modules + "/bad");
    auto metas = source.Modules();
    return now.ok() && metas.size() == 2 && metas[0].name == "bad" &&
           metas[0].resource_version ==
               kmodd::StringAt(*now, {"metadata", "resourceVersion"});
  }));
  writer.SyncOnce();
  for (const std::string& call : api.calls()) {
    CHECK(call != "PATCH " + modules + "/bad");  // no finalizer write was even tried
  }
  auto bad = api.Get(modules + "/bad");
  REQUIRE(bad.ok());
  CHECK(ConditionOf(*bad, "Accepted", "status") == "False");
  CHECK(ConditionOf(*bad, "Accepted", "message")
            .find("spec.moduleLoader.container.kernelMappings[0].regexp: ") == 0);
  CHECK(kmodd::Lookup(*bad, {"metadata", "finalizers"}) == nullptr);
  const auto warnings = api.Objects(kmodd::kube::ResourcePath("v1", "events", "ns"));
  REQUIRE(warnings.size() == 1);
  CHECK(kmodd::StringAt(warnings.begin()->second, {"reason"}) == "Rejected");
  CHECK(kmodd::StringAt(warnings.begin()->second, {"type"}) == "Warning");

  // Fixed: accepted, planned, sent, and from now on held by the finalizer.
  REQUIRE(api.MergePatch(modules + "/bad", module("^6\\\\.1\\\\.")).ok());
  REQUIRE(Eventually([&] {
    const auto pushes = w1.Pushes();
    return !pushes.empty() && pushes.back() == "bad,good";
  }));
  // A finalizer patch made from a resourceVersion the status write just replaced is
  // refused (409) and made again at the next pass, as in the controller's loop.
  REQUIRE(Eventually([&] {
    writer.SyncOnce();
    bad = api.Get(modules + "/bad");
    return bad.ok() && kmodd::Lookup(*bad, {"metadata", "finalizers"}) != nullptr;
  }));
  CHECK(ConditionOf(*bad, "Accepted", "status") == "True");
  CHECK(kmodd::ToJsonLine(*kmodd::Lookup(*bad, {"metadata", "finalizers"})) ==
        R"(["kmodd.io/unload"])");
  source.Stop();
  std::fclose(devnull);
}

TEST_CASE("Kubernetes mode: after a restart a rejected Module with the finalizer stays on the nodes that run it") {
  std::FILE* devnull = std::fopen("/dev/null", "w");
  kmodd::Logger log(devnull);
  kmodd::kube::FakeKubeClient api;
  const std::string modules = kmodd::kube::ResourcePath("kmm.sigs.x-k8s.io/v1beta1", "modules", "ns");
  // Accepted by the controller's previous run (so it has the finalizer), edited invalid
  // since: this run does not know the spec w1 runs.
  const std::string finalized = R"(,"finalizers":["kmodd.io/unload"])";
  CreateWorker(api, "w1");
  CreateWorker(api, "w2");
  REQUIRE(api.Create(modules, ModuleObject("good", "^6\\\\.1\\\\.")).ok());
  REQUIRE(api.Create(modules, ModuleObject("old", "^6\\\\.1\\\\.([", finalized)).ok());
  kmodd::server::HubOptions options{"run", std::chrono::minutes(10)};
  options.nodes_from_api = true;
  kmodd::FakeClock clock;
  kmodd::server::Hub hub(options, clock, log);
  kmodd::source::KubeSource source(api, hub, RealClockRef(), log);
  source.Start();
  REQUIRE(Eventually([&] { return source.Synced(); }));

  LockedStream w1;
  LockedStream w2;
  Connect(hub, w1, "w1", {"old"});
  Connect(hub, w2, "w2", {});
  // w2 does not run it: it gets the rest. w1 would be told to unload it: it gets nothing,
  // and keeps what it runs.
  CHECK(w2.Pushes() == std::vector<std::string>{"good"});
  CHECK(w1.Pushes().empty());
  CHECK(AcceptedMessage(hub, "old").find("nodes that run it are sent nothing") !=
        std::string::npos);

  // Fixed: planned, and w1 gets everything, the Module included.
  REQUIRE(api.MergePatch(modules + "/old", ModuleObject("old", "^6\\\\.1\\\\.")).ok());
  REQUIRE(Eventually([&] { return !w1.Pushes().empty(); }));
  CHECK(w1.Pushes() == std::vector<std::string>{"good,old"});
  CHECK(w2.Pushes() == std::vector<std::string>{"good", "good,old"});

  // Rejected again, now with its spec known: everyone keeps it.
  REQUIRE(api.MergePatch(modules + "/old", ModuleObject("old", "(")).ok());
  REQUIRE(Eventually([&] { return AcceptedMessage(hub, "old").find("stays in force") != std::string::npos; }));
  CHECK(w1.Pushes().size() == 1);
  source.Stop();
  std::fclose(devnull);
}

TEST_CASE("Kubernetes mode: a pull Secret nodes could not use is reported on its Module and sent to none") {
  std::FILE* devnull = std::fopen("/dev/null", "w");
  kmodd::Logger log(devnull);
  kmodd::kube::FakeKubeClient api;
  const std::string modules = kmodd::kube::ResourcePath("kmm.sigs.x-k8s.io/v1beta1", "modules", "ns");
  const std::string secrets = kmodd::kube::ResourcePath("v1", "secrets", "ns");
  auto secret = [](const std::string& name, const std::string& type, const std::string& json) {
    auto s = kmodd::ParseJson(absl::StrCat(R"({"metadata":{"name":")", name, R"(","namespace":"ns"},)",
                                           R"("type":")", type, R"(","data":{".dockerconfigjson":")",
                                           absl::Base64Escape(json), "\"}}"));
    REQUIRE(s.ok());
    return *s;
  };
  // kubectl create secret docker-registry's shape; one the API server takes (it checks only
  // that the content is JSON) whose entry no node can read; the right content, wrong type.
  REQUIRE(api.Create(secrets, secret("good", "kubernetes.io/dockerconfigjson",
                                     R"({"auths":{"r":{"auth":"dTpw"}}})"))
              .ok());
  REQUIRE(api.Create(secrets, secret("bad", "kubernetes.io/dockerconfigjson",
                                     R"({"auths":{"r":"dTpw"}})"))
              .ok());
  REQUIRE(api.Create(secrets, secret("opaque", "Opaque", R"({"auths":{"r":{"auth":"dTpw"}}})"))
              .ok());
  CreateWorker(api, "w1");
  for (const char* name : {"good", "bad", "opaque"}) {
    Value m = ModuleObject(absl::StrCat("m-", name), "^6\\\\.1\\\\.");
    Value spec = *kmodd::Lookup(m, {"spec"});
    Value ref = Value::EmptyMap();
    ref.Set("name", name);
    REQUIRE(api.Create(modules, kmodd::With(m, "spec", kmodd::With(spec, "imageRepoSecret", ref))).ok());
  }
  kmodd::server::HubOptions options{"run", std::chrono::minutes(10)};
  options.nodes_from_api = true;
  kmodd::FakeClock clock;
  kmodd::server::Hub hub(options, clock, log);
  kmodd::source::KubeSource source(api, hub, RealClockRef(), log);
  source.Start();
  REQUIRE(Eventually([&] { return source.Synced(); }));

  LockedStream w1;
  Connect(hub, w1, "w1", {});
  REQUIRE(w1.Pushes() == std::vector<std::string>{"m-bad,m-good,m-opaque"});
  std::vector<std::string> sent;
  {
    std::lock_guard lock(w1.mu);
    for (const auto& [key, config] : w1.pushed.front()->pull_secrets()) {
      sent.push_back(key);
    }
  }
  CHECK(sent == std::vector<std::string>{"ns/good"});
  auto condition = [&](const std::string& module) {
    for (const auto& m : hub.Status().modules) {
      for (const auto& c : m.conditions) {
        if (m.name == module && c.type == "PullSecretResolved") {
          return absl::StrCat(c.status, " ", c.reason, ": ", c.message);
        }
      }
    }
    return std::string();
  };
  CHECK(condition("m-good").rfind("True Found", 0) == 0);
  CHECK(condition("m-bad").rfind(R"(False InvalidContent: Secret ns/bad: data[".dockerconfigjson"]: )"
                                 R"(auths["r"]: expected an object, got a string)",
                                 0) == 0);
  CHECK(condition("m-opaque").rfind("False WrongType: Secret ns/opaque is of type Opaque", 0) == 0);
  source.Stop();
  std::fclose(devnull);
}

namespace {

// The finalizers of Module ns/<name> as JSON ("null" when it has none).
std::string FinalizersOf(kmodd::kube::FakeKubeClient& api, const std::string& name) {
  auto m = api.Get(kmodd::kube::ResourcePath("kmm.sigs.x-k8s.io/v1beta1", "modules", "ns") + "/" +
                   name);
  REQUIRE(m.ok());
  const Value* f = kmodd::Lookup(*m, {"metadata", "finalizers"});
  return f == nullptr ? "null" : kmodd::ToJsonLine(*f);
}

}  // namespace

TEST_CASE("Kubernetes mode: only nodes a Module may run on hold its finalizer, after a restart too") {
  std::FILE* devnull = std::fopen("/dev/null", "w");
  kmodd::Logger log(devnull);
  kmodd::kube::FakeKubeClient api;
  const std::string modules = kmodd::kube::ResourcePath("kmm.sigs.x-k8s.io/v1beta1", "modules", "ns");
  // A restart while "old" was being deleted: the previous run planned it (its finalizer),
  // w1 still unloads it. This run plans it nowhere.
  CreateWorker(api, "w1");
  auto n = kmodd::ParseJson(
      R"({"metadata":{"name":"e1","labels":{"role":"db"}},"status":{"nodeInfo":)"
      R"({"kernelVersion":"6.1.0-27-cloud-amd64","bootID":"b1","architecture":"amd64"}}})");
  REQUIRE(n.ok());
  REQUIRE(api.Create(kmodd::kube::ResourcePath("v1", "nodes"), *n).ok());
  REQUIRE(api.Create(modules, ModuleObject("old", "^6\\\\.1\\\\.",
                                           R"(,"finalizers":["kmodd.io/unload"],)"
                                           R"("deletionTimestamp":"2026-01-01T00:00:00Z")"))
              .ok());
  kmodd::server::HubOptions options{"run", std::chrono::minutes(10)};
  options.nodes_from_api = true;
  kmodd::FakeClock clock;  // the writer's and the hub's: the writer waits on the hub
  kmodd::server::Hub hub(options, clock, log);
  kmodd::source::KubeSource source(api, hub, clock, log);
  kmodd::kube::EventRecorder events(api, clock, "kmodd-controller", "test");
  kmodd::server::KubeWriter writer(api, hub, source, events, [] { return true; }, clock, log);
  source.Start();
  REQUIRE(Eventually([&] { return source.Synced(); }));

  LockedStream w1;
  LockedStream e1;  // the compromised node: it runs nothing of ours
  Connect(hub, w1, "w1", {"old"});
  Connect(hub, e1, "e1", {"ghost"});
  writer.SyncOnce();
  CHECK(FinalizersOf(api, "old") == R"(["kmodd.io/unload"])");  // w1 still reports it

  // "fresh" is created now: planned for w1 only, and given the finalizer by this run.
  REQUIRE(api.Create(modules, ModuleObject("fresh", "^6\\\\.1\\\\.")).ok());
  REQUIRE(Eventually([&] {
    writer.SyncOnce();
    return FinalizersOf(api, "fresh") == R"(["kmodd.io/unload"])";
  }));
  REQUIRE(Eventually([&] {
    const auto pushes = w1.Pushes();
    return !pushes.empty() && pushes.back() == "fresh";
  }));
  CHECK(e1.Pushes() == std::vector<std::string>{""});
  // e1 claims it, and a Module that does not exist, as Loaded.
  kmodd::v1::NodeReport claim;
  for (const char* name : {"fresh", "ghost"}) {
    auto* m = claim.add_modules();
    m->set_namespace_("ns");
    m->set_name(name);
    m->set_phase(kmodd::v1::LOADED);
  }
  REQUIRE(hub.Report(&e1, claim).ok());
  CHECK(hub.Node("e1")->modules.empty());
  CHECK(hub.Node("e1")->ignored_modules == 3);

  // Both deleted; w1 unloads them and says so. e1 holds back neither.
  REQUIRE(api.MergePatch(modules + "/fresh",
                         *kmodd::ParseJson(R"({"metadata":{"deletionTimestamp":"2026-01-02T00:00:00Z"}})"))
              .ok());
  REQUIRE(Eventually([&] { return w1.Pushes().back().empty(); }));
  REQUIRE(hub.Report(&w1, kmodd::v1::NodeReport{}).ok());
  REQUIRE(Eventually([&] {
    writer.SyncOnce();
    return FinalizersOf(api, "old") == "[]" && FinalizersOf(api, "fresh") == "[]";
  }));
  for (const auto& m : hub.Status().modules) {
    for (const auto& row : m.nodes) {
      CHECK(row.node != "e1");
    }
  }
  source.Stop();
  std::fclose(devnull);
}

namespace {

// The labels of Node <name> on the API server.
std::map<std::string, std::string> NodeLabelsOf(kmodd::kube::FakeKubeClient& api,
                                                const std::string& name) {
  auto n = api.Get(kmodd::kube::ResourcePath("v1", "nodes", "", name));
  REQUIRE(n.ok());
  std::map<std::string, std::string> out;
  if (const Value* l = kmodd::Lookup(*n, {"metadata", "labels"}); l != nullptr && l->IsMap()) {
    for (const auto& [k, v] : l->AsMap()) {
      out[k] = v.AsString();
    }
  }
  return out;
}

// A writer on the fake API server with one worker Node and Module ns/a planned on it.
struct WriterHarness {
  explicit WriterHarness(const std::vector<std::string>& nodes = {"w1"},
                         kmodd::server::KubeWriterOptions options = {})
      : devnull(std::fopen("/dev/null", "w")), log(devnull), hub(Options(), clock, log) {
    for (const std::string& n : nodes) {
      CreateWorker(api, n);
    }
    REQUIRE(api.Create(kModules, ModuleObject("a", "^6\\\\.1\\\\.")).ok());
    source = std::make_unique<kmodd::source::KubeSource>(api, hub, clock, log);
    events = std::make_unique<kmodd::kube::EventRecorder>(api, clock, "kmm", "test");
    writer = std::make_unique<kmodd::server::KubeWriter>(
        api, hub, *source, *events, [this] { return leader.load(); }, clock, log, options);
    source->Start();
    REQUIRE(Eventually([&] { return source->Synced(); }));
  }
  ~WriterHarness() {
    writer->Stop();
    source->Stop();
    std::fclose(devnull);
  }
  static kmodd::server::HubOptions Options() {
    kmodd::server::HubOptions o{"run", std::chrono::minutes(10)};
    o.nodes_from_api = true;
    return o;
  }
  // Node and Module writes so far.
  size_t Writes() {
    size_t n = 0;
    for (const std::string& call : api.calls()) {
      n += call.rfind("PATCH ", 0) == 0 ? 1 : 0;
    }
    return n;
  }
  int64_t DesiredNumber() {
    auto m = api.Get(kModules + "/a");
    return m.ok() ? kmodd::IntAt(*m, {"status", "moduleLoader", "desiredNumber"}) : -1;
  }

  inline static const std::string kModules =
      kmodd::kube::ResourcePath("kmm.sigs.x-k8s.io/v1beta1", "modules", "ns");
  std::FILE* devnull;
  kmodd::Logger log;
  kmodd::kube::FakeKubeClient api;
  kmodd::FakeClock clock;
  kmodd::server::Hub hub;
  std::atomic<bool> leader{true};
  std::unique_ptr<kmodd::source::KubeSource> source;
  std::unique_ptr<kmodd::kube::EventRecorder> events;
  std::unique_ptr<kmodd::server::KubeWriter> writer;
};

constexpr char kReadyA[] = "kmm.node.kubernetes.io/ns.a.ready";

}  // namespace

TEST_CASE("Kubernetes mode: a follower writes nothing; on leading every label, status and finalizer is written once") {
  WriterHarness h;
  LockedStream w1;
  Connect(h.hub, w1, "w1", {"a"});
  h.leader = false;
  h.writer->SyncOnce();
  CHECK(h.Writes() == 0);

  h.leader = true;
  h.writer->SyncOnce();
  CHECK(NodeLabelsOf(h.api, "w1").count(kReadyA) == 1);
  CHECK(h.DesiredNumber() == 1);
  CHECK(FinalizersOf(h.api, "a") == R"(["kmodd.io/unload"])");
}

TEST_CASE("Kubernetes mode: a new leader keeps the labels of nodes it has not heard from yet") {
  WriterHarness h({"w1", "w2"});
  for (const char* node : {"w1", "w2"}) {
    REQUIRE(h.api.MergePatch(kmodd::kube::ResourcePath("v1", "nodes", "", node),
                             *kmodd::ParseJson(absl::StrCat(R"({"metadata":{"labels":{")", kReadyA,
                                                            R"(":""}}})")))
                .ok());
  }
  REQUIRE(Eventually([&] {
    auto n = h.source->Node("w2");
    return n && n->labels.count(kReadyA) == 1;
  }));
  // w1's agent has connected to this leader but not reported yet; w2's not connected.
  LockedStream w1;
  kmodd::v1::NodeInfo info;
  info.set_name("w1");
  info.set_kernel_release("6.1.0-27-cloud-amd64");
  REQUIRE(h.hub.Hello(&w1, info).ok());
  h.writer->SyncOnce();
  CHECK(NodeLabelsOf(h.api, "w1").count(kReadyA) == 1);
  CHECK(NodeLabelsOf(h.api, "w2").count(kReadyA) == 1);

  // w1 reports: it runs nothing. Its label goes; w2's stays.
  REQUIRE(h.hub.Report(&w1, kmodd::v1::NodeReport{}).ok());
  h.writer->SyncOnce();
  CHECK(NodeLabelsOf(h.api, "w1").count(kReadyA) == 0);
  CHECK(NodeLabelsOf(h.api, "w2").count(kReadyA) == 1);
}

TEST_CASE("Kubernetes mode: the writer's workers follow hub changes; a disconnected agent does not hold the finalizer") {
  kmodd::server::KubeWriterOptions options;
  options.workers = 2;
  WriterHarness h({"w1"}, options);
  h.writer->Start();
  LockedStream w1;
  Connect(h.hub, w1, "w1", {"a"});
  // A finalizer patch from a resourceVersion the watch has not caught up with conflicts and
  // is retried with the key's backoff: time moves on for it.
  auto after_backoff = [&](const std::function<bool()>& done) {
    return Eventually([&] {
      h.clock.Advance(std::chrono::seconds(1));
      return done();
    });
  };
  REQUIRE(after_backoff([&] { return NodeLabelsOf(h.api, "w1").count(kReadyA) == 1; }));
  REQUIRE(after_backoff([&] { return FinalizersOf(h.api, "a") == R"(["kmodd.io/unload"])"; }));

  // Deleted; w1's agent goes away before it reports the module unloaded.
  REQUIRE(h.api.MergePatch(h.kModules + "/a",
                           *kmodd::ParseJson(R"({"metadata":{"deletionTimestamp":"2026-01-02T00:00:00Z"}})"))
              .ok());
  h.hub.Goodbye(&w1);
  REQUIRE(after_backoff([&] { return FinalizersOf(h.api, "a") == "[]"; }));
  // Its last report said Loaded: the label stays while it is away.
  CHECK(NodeLabelsOf(h.api, "w1").count(kReadyA) == 1);
}

TEST_CASE("Kubernetes mode: a status changed behind the writer's back is written again at the resync") {
  WriterHarness h;
  h.writer->Start();
  REQUIRE(Eventually([&] { return h.DesiredNumber() == 1; }));
  REQUIRE(h.api.MergePatch(h.kModules + "/a/status",
                           *kmodd::ParseJson(R"({"status":{"moduleLoader":{"desiredNumber":99}}})"))
              .ok());
  h.clock.Advance(kmodd::server::KubeWriterOptions{}.resync);
  REQUIRE(Eventually([&] { return h.DesiredNumber() == 1; }));
}

TEST_CASE("Kubernetes mode: node labels follow each report at once; Module status at most once per snapshot interval") {
  kmodd::server::KubeWriterOptions options;
  options.snapshot_interval = std::chrono::hours(1);
  WriterHarness h({"w1", "w2"}, options);
  auto available = [&] {
    auto m = h.api.Get(h.kModules + "/a");
    return m.ok() ? kmodd::IntAt(*m, {"status", "moduleLoader", "availableNumber"}) : -1;
  };
  h.writer->Start();
  // The first snapshot is taken at once: nothing loaded yet.
  REQUIRE(Eventually([&] { return h.DesiredNumber() == 2; }));
  CHECK(available() == 0);

  LockedStream w1;
  Connect(h.hub, w1, "w1", {"a"});
  REQUIRE(Eventually([&] { return NodeLabelsOf(h.api, "w1").count(kReadyA) == 1; }));
  LockedStream w2;
  Connect(h.hub, w2, "w2", {"a"});
  REQUIRE(Eventually([&] { return NodeLabelsOf(h.api, "w2").count(kReadyA) == 1; }));
  // Both labels are written, and the status has not been read again: it waits for the
  // interval, then counts both at once.
  CHECK(available() == 0);
  h.clock.Advance(std::chrono::hours(1));
  REQUIRE(Eventually([&] { return available() == 2; }));
}

namespace {

// Module ns/a gains spec.<field> = `json` on the API server.
void AddToSpec(WriterHarness& h, const char* field, const char* json) {
  auto m = h.api.Get(h.kModules + "/a");
  REQUIRE(m.ok());
  auto added = kmodd::ParseJson(json);
  REQUIRE(added.ok());
  Value spec = kmodd::With(*kmodd::Lookup(*m, {"spec"}), field, *added);
  REQUIRE(h.api.Update(h.kModules + "/a", kmodd::With(*m, "spec", spec)).ok());
}

void AddDevicePlugin(WriterHarness& h) {
  AddToSpec(h, "devicePlugin", R"({"container":{"image":"r/plugin:1"}})");
}

}  // namespace

TEST_CASE("Kubernetes mode: a Module with a device plugin gets its DaemonSet from the writer") {
  WriterHarness h;
  AddDevicePlugin(h);
  REQUIRE(Eventually([&] {
    auto hm = h.hub.ModuleObject("ns/a");
    return hm && hm->spec.device_plugin.has_value();
  }));
  h.writer->SyncOnce();
  const auto ds = h.api.Objects(kmodd::kube::ResourcePath("apps/v1", "daemonsets", "ns"));
  REQUIRE(ds.size() == 1);
  CHECK(ds.begin()->first.rfind("a-device-plugin-", 0) == 0);
}

TEST_CASE("Kubernetes mode: a Module with a DRA driver gets its DaemonSet and DeviceClasses from the writer") {
  WriterHarness h;
  AddToSpec(h, "dra", R"({"driverName":"gpu.example.com","container":{"image":"r/dra:1"},
                          "deviceClasses":[{"name":"gpu.example.com"}]})");
  REQUIRE(Eventually([&] {
    auto hm = h.hub.ModuleObject("ns/a");
    return hm && hm->spec.dra.has_value();
  }));
  h.writer->SyncOnce();
  const auto ds = h.api.Objects(kmodd::kube::ResourcePath("apps/v1", "daemonsets", "ns"));
  REQUIRE(ds.size() == 1);
  CHECK(ds.begin()->first.rfind("a-dra-", 0) == 0);
  const auto classes = h.api.Objects("/apis/resource.k8s.io/v1/deviceclasses");
  REQUIRE(classes.size() == 1);
  CHECK(classes.begin()->first == "gpu.example.com");
}

TEST_CASE("Kubernetes mode: a device plugin Module's target label reaches its nodes through the writer") {
  WriterHarness h;
  LockedStream w1;
  Connect(h.hub, w1, "w1", {"a"});
  h.writer->SyncOnce();
  CHECK(NodeLabelsOf(h.api, "w1").count("kmm.node.kubernetes.io/ns.a.device-plugin-target") == 0);
  AddDevicePlugin(h);
  REQUIRE(Eventually([&] { return h.hub.PluginModules().size() == 1; }));
  h.writer->SyncOnce();
  CHECK(NodeLabelsOf(h.api, "w1").count("kmm.node.kubernetes.io/ns.a.device-plugin-target") == 1);
}

// The hub keeps a module under its plugin (Hub::SetPluginPods, Hub::Draining): issue 14's
// order on upgrade and delete, as far as what a node is sent.

#include <catch2/catch.hpp>

#include <cstdio>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "api/decode.h"
#include "common/json.h"
#include "controller/server/hub.h"
#include "hub_fixtures.h"
#include "tests/fakes/fake_clock.h"
#include "tests/log_file.h"

using kmodd::server::Hub;
using kmodd::server::ModulePods;
using kmodd::server::NodePluginPods;
using kmodd::source::ModuleChanges;
using kmodd::source::SourceUpdate;
using kmodd::testing::FakeStream;

namespace {

// demo/a for role=worker nodes, loading `image`, with a device plugin.
kmodd::api::Module PluginModule(const std::string& image) {
  auto m = kmodd::api::DecodeModule(absl::StrCat(
      "apiVersion: kmm.sigs.x-k8s.io/v1beta1\nkind: Module\nmetadata: {name: a, namespace: demo}\n"
      "spec:\n  selector: {role: worker}\n"
      "  devicePlugin: {container: {image: 'r/plugin:1'}}\n"
      "  moduleLoader:\n    container:\n      modprobe: {moduleName: m}\n"
      "      kernelMappings:\n        - {regexp: '^.+$', containerImage: '",
      image, "'}\n"));
  REQUIRE(m.ok());
  return *m;
}

SourceUpdate Set(kmodd::api::Module m) {
  SourceUpdate u;
  u.changes.push_back(ModuleChanges{{std::move(m)}, {}});
  return u;
}

SourceUpdate Remove(const std::string& key) {
  SourceUpdate u;
  u.changes.push_back(ModuleChanges{{}, {key}});
  return u;
}

kmodd::v1::NodeInfo Worker(const std::string& name) {
  kmodd::v1::NodeInfo i;
  i.set_name(name);
  i.set_kernel_release("6.1.0-27-cloud-amd64");
  i.set_boot_id("b1");
  (*i.mutable_labels())["role"] = "worker";
  return i;
}

// demo/a Loaded from `image`.
kmodd::v1::NodeReport Loaded(const std::string& image) {
  kmodd::v1::NodeReport r;
  auto* m = r.add_modules();
  m->set_namespace_("demo");
  m->set_name("a");
  m->set_phase(kmodd::v1::LOADED);
  m->set_image(image);
  return r;
}

using Harness = kmodd::testing::HubHarness;

const NodePluginPods kPodOfA{{"demo/a", ModulePods{true, false}}};

}  // namespace

TEST_CASE("hub: an image change waits on a node until the Module's plugin Pod has left it") {
  Harness h;
  h.hub.ApplySource(Set(PluginModule("r/a:1")));
  FakeStream w1, w2;
  REQUIRE(h.hub.Hello(&w1, Worker("w1")).ok());
  REQUIRE(h.hub.Hello(&w2, Worker("w2")).ok());
  REQUIRE(h.hub.Report(&w1, Loaded("r/a:1")).ok());
  REQUIRE(h.hub.Report(&w2, Loaded("r/a:1")).ok());
  CHECK_FALSE(h.hub.PluginPods("w1").has_value());  // not listed yet
  h.hub.SetAllPluginPods({{"w1", kPodOfA}});
  REQUIRE(h.hub.PluginPods("w1") == kPodOfA);
  CHECK(h.hub.PluginPods("w2") == NodePluginPods{});
  CHECK(h.hub.Draining("w1").empty());

  h.hub.ApplySource(Set(PluginModule("r/a:2")));
  // w2 has no plugin Pod: it swaps at once. w1 keeps r/a:1 and is draining.
  CHECK(w2.Last().modules(0).container_image() == "r/a:2");
  REQUIRE(w1.Last().modules_size() == 1);
  CHECK(w1.Last().modules(0).container_image() == "r/a:1");
  CHECK(h.hub.Draining("w1") == std::set<std::string>{"demo/a"});
  CHECK(h.hub.Draining("w2") == std::set<std::string>{"demo/a"});  // reports r/a:1 still

  // The Pod's readiness changing holds on; the Pod gone releases.
  h.hub.SetPluginPods("w1", {{"demo/a", ModulePods{false, false}}});
  CHECK(w1.Last().modules(0).container_image() == "r/a:1");
  h.hub.SetPluginPods("w1", {});
  CHECK(w1.Last().modules(0).container_image() == "r/a:2");
  // Still draining until the agent reports the new image Loaded: the plugin comes back
  // only onto the new driver.
  CHECK(h.hub.Draining("w1") == std::set<std::string>{"demo/a"});
  REQUIRE(h.hub.Report(&w1, Loaded("r/a:2")).ok());
  CHECK(h.hub.Draining("w1").empty());

  // A Pod that comes back onto the new driver holds nothing: what the node runs is its plan.
  const size_t pushes = w1.pushed.size();
  h.hub.SetPluginPods("w1", kPodOfA);
  CHECK(w1.pushed.size() == pushes);
  CHECK(h.hub.Draining("w1").empty());
}

TEST_CASE("hub: a deleted Module stays on a node until its plugin Pod has left it") {
  Harness h;
  h.hub.ApplySource(Set(PluginModule("r/a:1")));
  FakeStream w1;
  REQUIRE(h.hub.Hello(&w1, Worker("w1")).ok());
  REQUIRE(h.hub.Report(&w1, Loaded("r/a:1")).ok());
  h.hub.SetAllPluginPods({{"w1", kPodOfA}});

  h.hub.ApplySource(Remove("demo/a"));
  REQUIRE(w1.Last().modules_size() == 1);
  CHECK(w1.Last().modules(0).name() == "a");
  CHECK(h.hub.Draining("w1") == std::set<std::string>{"demo/a"});

  // A relist that no longer shows the Pod releases it.
  h.hub.SetAllPluginPods({});
  CHECK(w1.Last().modules_size() == 0);
  CHECK(h.hub.Draining("w1").empty());
}

TEST_CASE("hub: a plugin Pod of another Module, or on another node, holds nothing") {
  Harness h;
  h.hub.ApplySource(Set(PluginModule("r/a:1")));
  FakeStream w1;
  REQUIRE(h.hub.Hello(&w1, Worker("w1")).ok());
  h.hub.SetAllPluginPods({{"w1", {{"demo/b", ModulePods{true, false}}}},
                          {"w9", kPodOfA}});
  h.hub.ApplySource(Remove("demo/a"));
  CHECK(w1.Last().modules_size() == 0);
}

TEST_CASE("hub: status counts the nodes a plugin may run on and its Ready Pods") {
  Harness h;
  h.hub.ApplySource(Set(PluginModule("r/a:1")));
  FakeStream w1, w2, other;
  REQUIRE(h.hub.Hello(&w1, Worker("w1")).ok());
  REQUIRE(h.hub.Hello(&w2, Worker("w2")).ok());
  kmodd::v1::NodeInfo o = Worker("other");
  o.mutable_labels()->clear();
  REQUIRE(h.hub.Hello(&other, o).ok());
  h.hub.SetAllPluginPods({{"w1", kPodOfA}, {"w2", {{"demo/a", ModulePods{false, false}}}}});
  const auto st = h.hub.Status();
  REQUIRE(st.modules.size() == 1);
  REQUIRE(st.modules[0].device_plugin.has_value());
  CHECK(st.modules[0].device_plugin->nodes_matching_selector_number == 2);
  CHECK(st.modules[0].device_plugin->desired_number == 2);
  CHECK(st.modules[0].device_plugin->available_number == 1);
  CHECK_FALSE(st.modules[0].dra.has_value());
  const kmodd::Value v = kmodd::server::ModuleStatusValue(st.modules[0]);
  CHECK(kmodd::IntAt(v, {"devicePlugin", "availableNumber"}) == 1);
  CHECK(kmodd::IntAt(v, {"devicePlugin", "desiredNumber"}) == 2);
  CHECK(kmodd::Lookup(v, {"dra"}) == nullptr);
}

TEST_CASE("hub: after a restart, a node is sent nothing that would swap a module under its plugin Pod") {
  kmodd::server::HubOptions options{"run", std::chrono::minutes(10)};
  options.wait_for_plugin_pods = true;
  Harness h(options);
  // The plan says r/a:2; w1 runs r/a:1 from before this run, under its plugin.
  h.hub.ApplySource(Set(PluginModule("r/a:2")));
  FakeStream w1, w2;
  REQUIRE(h.hub.Hello(&w1, Worker("w1")).ok());
  CHECK(w1.pushed.empty());  // the Pods are not listed yet
  h.hub.SetAllPluginPods({{"w1", kPodOfA}});
  CHECK(w1.pushed.empty());  // what it runs is not known yet
  REQUIRE(h.hub.Hello(&w2, Worker("w2")).ok());
  REQUIRE(w2.pushed.size() == 1);  // no plugin Pod there: served at once
  CHECK(w2.Last().modules(0).container_image() == "r/a:2");
  REQUIRE(h.hub.Report(&w1, Loaded("r/a:1")).ok());
  CHECK(w1.pushed.empty());  // its plan would swap the module under the Pod
  CHECK(h.hub.Draining("w1") == std::set<std::string>{"demo/a"});
  // The Pod's readiness changing keeps it waiting; the Pod gone, it gets its plan.
  h.hub.SetPluginPods("w1", {{"demo/a", ModulePods{false, false}}});
  CHECK(w1.pushed.empty());
  h.hub.SetPluginPods("w1", {});
  REQUIRE(w1.pushed.size() == 1);
  CHECK(w1.Last().modules(0).container_image() == "r/a:2");
}

TEST_CASE("hub: after a restart, a node whose plugin Pod runs on what the plan says is served at once") {
  kmodd::server::HubOptions options{"run", std::chrono::minutes(10)};
  options.wait_for_plugin_pods = true;
  Harness h(options);
  h.hub.ApplySource(Set(PluginModule("r/a:1")));
  h.hub.SetAllPluginPods({{"w1", kPodOfA}});
  FakeStream w1;
  REQUIRE(h.hub.Hello(&w1, Worker("w1")).ok());
  CHECK(w1.pushed.empty());
  REQUIRE(h.hub.Report(&w1, Loaded("r/a:1")).ok());
  REQUIRE(w1.pushed.size() == 1);
  CHECK(w1.Last().modules(0).container_image() == "r/a:1");
}

TEST_CASE("hub: after a restart, the node waiting on one plugin Pod beside another is sent its plan when that one goes, and says so") {
  kmodd::server::HubOptions options{"run", std::chrono::minutes(10)};
  options.wait_for_plugin_pods = true;
  kmodd::testing::LogFile log;
  kmodd::FakeClock clock{absl::FromUnixMillis(1'000'000)};
  Hub hub(options, clock, log.log);
  hub.ApplySource(Set(PluginModule("r/a:2")));
  const NodePluginPods both{{"demo/a", ModulePods{true, false}}, {"demo/b", ModulePods{false, true}}};
  hub.SetAllPluginPods({{"w1", both}});
  FakeStream w1;
  REQUIRE(hub.Hello(&w1, Worker("w1")).ok());
  REQUIRE(hub.Report(&w1, Loaded("r/a:1")).ok());
  CHECK(w1.pushed.empty());
  hub.SetPluginPods("w1", {{"demo/a", ModulePods{false, false}}, {"demo/b", ModulePods{false, true}}});
  CHECK(w1.pushed.empty());
  hub.SetPluginPods("w1", {{"demo/b", ModulePods{false, true}}});
  REQUIRE(w1.pushed.size() == 1);
  CHECK(w1.Last().modules(0).container_image() == "r/a:2");
  CHECK(log.Text().find("plugin Pod gone: the node is sent its first desired state") != std::string::npos);
}

TEST_CASE("hub: new readiness checks alone reach a node under its plugin Pod - nothing drains") {
  Harness h;
  h.hub.ApplySource(Set(PluginModule("r/a:1")));
  FakeStream w1;
  REQUIRE(h.hub.Hello(&w1, Worker("w1")).ok());
  REQUIRE(h.hub.Report(&w1, Loaded("r/a:1")).ok());
  h.hub.SetAllPluginPods({{"w1", kPodOfA}});
  kmodd::api::ModulePolicy p;
  p.metadata.name = "a";
  p.metadata.namespace_ = "demo";
  p.module_name = "a";
  kmodd::api::ReadinessCheck live;
  live.name = "live";
  live.path = "/sys/module/m/initstate";
  live.equals = "live";
  p.readiness = {live};
  SourceUpdate u;
  u.policies = std::map<std::string, kmodd::api::ModulePolicy>{{"demo/a", p}};
  h.hub.ApplySource(u);
  REQUIRE(w1.Last().modules_size() == 1);
  CHECK(w1.Last().modules(0).container_image() == "r/a:1");
  REQUIRE(w1.Last().modules(0).readiness_size() == 1);
  CHECK(w1.Last().modules(0).readiness(0).path() == "/sys/module/m/initstate");
  CHECK(h.hub.Draining("w1").empty());
}

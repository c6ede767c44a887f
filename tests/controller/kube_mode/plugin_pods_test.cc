#include "controller/kube_mode/plugin_pods.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tests/must_parse.h"

using kmodd::Value;
using kmodd::kube::EventType;
using kmodd::server::ModulePods;
using kmodd::server::NodePluginPods;
using kmodd::source::PluginPodFromObject;
using kmodd::source::PluginPodIndex;
using kmodd::testing::MustParse;

namespace {

// A Pod of Module demo/<module> with role `role` on `node`, Ready or not.
Value Pod(const std::string& name, const std::string& node, bool ready,
          const std::string& role = "device-plugin", const std::string& module = "gpu") {
  return MustParse(R"({"metadata": {"namespace": "demo", "name": ")" + name +
                   R"(", "labels": {"kmm.node.kubernetes.io/module.name": ")" + module +
                   R"(", "kmm.node.kubernetes.io/role": ")" + role +
                   R"("}}, "spec": {"nodeName": ")" + node +
                   R"("}, "status": {"conditions": [{"type": "PodScheduled", "status": "True"},
                   {"type": "Ready", "status": ")" + (ready ? "True" : "False") + R"("}]}})");
}

}  // namespace

TEST_CASE("plugin pods: a device plugin or DRA Pod of a Module, and its readiness") {
  auto p = PluginPodFromObject(Pod("gpu-dp-x", "n1", true));
  REQUIRE(p);
  CHECK(p->id == "demo/gpu-dp-x");
  CHECK(p->module_key == "demo/gpu");
  CHECK(p->node == "n1");
  CHECK_FALSE(p->dra);
  CHECK(p->ready);
  p = PluginPodFromObject(Pod("gpu-dra-x", "n1", false, "dra"));
  REQUIRE(p);
  CHECK(p->dra);
  CHECK_FALSE(p->ready);
  // Being deleted: not Ready, whatever its condition says (KMM's rule for the label).
  Value deleting = Pod("gpu-dp-x", "n1", true);
  deleting = kmodd::With(deleting, "metadata",
                         kmodd::With(*deleting.Find("metadata"), "deletionTimestamp",
                                     Value("2026-12-03T10:00:00Z")));
  p = PluginPodFromObject(deleting);
  REQUIRE(p);
  CHECK_FALSE(p->ready);
}

TEST_CASE("plugin pods: hostile or foreign Pods are left out, never thrown on") {
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"not an object", R"([1, 2])"},
      {"no metadata", R"({"spec": {"nodeName": "n1"}})"},
      {"labels a list", R"({"metadata": {"namespace": "demo", "name": "p", "labels": ["x"]}})"},
      {"no module label",
       R"({"metadata": {"namespace": "demo", "name": "p", "labels": {"kmm.node.kubernetes.io/role": "device-plugin"}}})"},
      {"module label a number",
       R"({"metadata": {"namespace": "demo", "name": "p", "labels": {"kmm.node.kubernetes.io/module.name": 7, "kmm.node.kubernetes.io/role": "dra"}}})"},
      {"module label not a name",
       R"({"metadata": {"namespace": "demo", "name": "p", "labels": {"kmm.node.kubernetes.io/module.name": "../x", "kmm.node.kubernetes.io/role": "dra"}}})"},
      {"a module loader Pod",
       R"({"metadata": {"namespace": "demo", "name": "p", "labels": {"kmm.node.kubernetes.io/module.name": "gpu", "kmm.node.kubernetes.io/role": "module-loader"}}})"},
      {"namespace not a label",
       R"({"metadata": {"namespace": "Demo!", "name": "p", "labels": {"kmm.node.kubernetes.io/module.name": "gpu", "kmm.node.kubernetes.io/role": "dra"}}})"},
      {"namespace a map",
       R"({"metadata": {"namespace": {}, "name": "p", "labels": {"kmm.node.kubernetes.io/module.name": "gpu", "kmm.node.kubernetes.io/role": "dra"}}})"},
  };
  for (const auto& [what, text] : cases) {
    INFO(what);
    CHECK_FALSE(PluginPodFromObject(MustParse(text)).has_value());
  }
  // Odd shapes where a Pod of ours has them: kept, not Ready.
  const std::vector<std::pair<const char*, std::string>> unready = {
      {"conditions an object",
       R"({"metadata": {"namespace": "demo", "name": "p", "labels": {"kmm.node.kubernetes.io/module.name": "gpu", "kmm.node.kubernetes.io/role": "dra"}}, "spec": {"nodeName": "n1"}, "status": {"conditions": {"type": "Ready"}}})"},
      {"condition status a bool",
       R"({"metadata": {"namespace": "demo", "name": "p", "labels": {"kmm.node.kubernetes.io/module.name": "gpu", "kmm.node.kubernetes.io/role": "dra"}}, "spec": {"nodeName": "n1"}, "status": {"conditions": [{"type": "Ready", "status": true}]}})"},
      {"nodeName a number",
       R"({"metadata": {"namespace": "demo", "name": "p", "labels": {"kmm.node.kubernetes.io/module.name": "gpu", "kmm.node.kubernetes.io/role": "dra"}}, "spec": {"nodeName": 5}})"},
  };
  for (const auto& [what, text] : unready) {
    INFO(what);
    auto p = PluginPodFromObject(MustParse(text));
    REQUIRE(p.has_value());
    CHECK_FALSE(p->ready);
  }
}

TEST_CASE("plugin pods: the index summarises each node and says which nodes an event changed") {
  PluginPodIndex index;
  auto all = index.Sync({Pod("a", "n1", true), Pod("b", "n1", false, "dra"), Pod("c", "", true),
                         Pod("d", "n2", false, "device-plugin", "nic")});
  CHECK(all == PluginPodIndex::Summaries{
                   {"n1", {{"demo/gpu", ModulePods{true, false}}}},
                   {"n2", {{"demo/nic", ModulePods{false, false}}}}});

  // c is scheduled onto n2.
  auto changed = index.Apply(EventType::kModified, Pod("c", "n2", true));
  REQUIRE(changed.size() == 1);
  CHECK(changed[0].first == "n2");
  CHECK(changed[0].second == NodePluginPods{{"demo/gpu", ModulePods{true, false}},
                                            {"demo/nic", ModulePods{false, false}}});
  // b Ready.
  changed = index.Apply(EventType::kModified, Pod("b", "n1", true, "dra"));
  REQUIRE(changed.size() == 1);
  CHECK(changed[0].second == NodePluginPods{{"demo/gpu", ModulePods{true, true}}});
  // a and b deleted: n1 has none left.
  (void)index.Apply(EventType::kDeleted, Pod("a", "n1", true));
  changed = index.Apply(EventType::kDeleted, Pod("b", "n1", true, "dra"));
  REQUIRE(changed.size() == 1);
  CHECK(changed[0] == std::pair<std::string, NodePluginPods>{"n1", {}});
  // A Pod relabelled out of our roles is gone, as if deleted.
  changed = index.Apply(EventType::kModified, Pod("d", "n2", false, "module-loader", "nic"));
  REQUIRE(changed.size() == 1);
  CHECK(changed[0].second == NodePluginPods{{"demo/gpu", ModulePods{true, false}}});
  // A foreign Pod touches nothing.
  CHECK(index.Apply(EventType::kAdded, MustParse(R"({"metadata": {"name": "x"}})")).empty());
}

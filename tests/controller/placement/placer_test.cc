#include <catch2/catch.hpp>

#include "controller/placement/placer.h"
#include "placement_fixtures.h"

using kmodd::placement::NodePlacement;
using kmodd::placement::Placer;
using kmodd::placement::SkipReason;
using kmodd::testing::LoaderModule;
using kmodd::testing::MakeNode;
using kmodd::testing::ModuleFromYaml;

namespace {

const char kAnyKernel[] = R"(      kernelMappings:
        - regexp: '^.+$'
          containerImage: reg/drv:$KERNEL_FULL_VERSION
)";

std::string Versioned(const std::string& version) {
  return "      version: \"" + version + "\"\n" +
         "      kernelMappings:\n        - regexp: '.'\n          containerImage: reg/drv:" +
         version + "\n";
}

// "run:<image>", "held:<image>" or "skip:<reason number>" for one module on one node.
std::string Outcome(const Placer& p, const std::string& node, const std::string& module) {
  auto plan = p.PlacementFor(node);
  REQUIRE(plan.has_value());
  for (const auto& m : plan->modules) {
    if (m.module->Key() == module) {
      return std::string(m.held ? "held:" : "run:") + m.config->container_image;
    }
  }
  for (const auto& s : plan->skipped) {
    if (s.module->Key() == module) {
      return "skip:" + std::to_string(static_cast<int>(s.reason));
    }
  }
  return "absent";
}

std::string SkipOf(SkipReason r) { return "skip:" + std::to_string(static_cast<int>(r)); }

}  // namespace

TEST_CASE("planner selects nodes by label and keeps modules on cordoned nodes") {
  Placer p;
  auto cordoned = MakeNode("cordoned", "6.1.0-1", {{"role", "gpu"}},
                           {{"node.kubernetes.io/unschedulable", "", "NoSchedule"}});
  cordoned.unschedulable = true;
  p.SetNode(MakeNode("gpu", "6.1.0-1", {{"role", "gpu"}}));
  p.SetNode(MakeNode("cpu", "6.1.0-1", {{"role", "cpu"}}));
  p.SetNode(cordoned);
  p.SetModule(ModuleFromYaml(LoaderModule("m", kAnyKernel, "  selector: {role: gpu}\n")));
  CHECK(Outcome(p, "gpu", "ns/m") == "run:reg/drv:6.1.0-1");
  CHECK(Outcome(p, "cordoned", "ns/m") == "run:reg/drv:6.1.0-1");
  CHECK(Outcome(p, "cpu", "ns/m") == SkipOf(SkipReason::kSelector));
}

TEST_CASE("planner takes a node out only for an untolerated NoExecute taint") {
  Placer p;
  p.SetNode(MakeNode("evicting", "6.1.0-1", {}, {{"gone", "", "NoExecute"}}));
  p.SetNode(MakeNode("maint", "6.1.0-1", {}, {{"maint", "", "NoExecute"}}));
  p.SetNode(MakeNode("noschedule", "6.1.0-1", {}, {{"x", "", "NoSchedule"}}));
  p.SetModule(ModuleFromYaml(LoaderModule(
      "m", kAnyKernel, "  tolerations: [{key: maint, operator: Exists, effect: NoExecute}]\n")));
  CHECK(Outcome(p, "evicting", "ns/m") == SkipOf(SkipReason::kTaint));
  CHECK(Outcome(p, "maint", "ns/m") == "run:reg/drv:6.1.0-1");
  CHECK(Outcome(p, "noschedule", "ns/m") == "run:reg/drv:6.1.0-1");
}

TEST_CASE("planner matches the node kernel with one trailing plus trimmed") {
  Placer p;
  p.SetNode(MakeNode("dirty", "6.12.9+"));
  p.SetNode(MakeNode("nokernel", ""));
  p.SetModule(ModuleFromYaml(LoaderModule("m", R"(      kernelMappings:
        - literal: 6.12.9
          containerImage: reg/drv:$KERNEL_FULL_VERSION
)")));
  CHECK(Outcome(p, "dirty", "ns/m") == "run:reg/drv:6.12.9");
  CHECK(Outcome(p, "nokernel", "ns/m") == SkipOf(SkipReason::kNoKernel));
}

TEST_CASE("planner says why a node has no mapping and skips device-plugin-only Modules") {
  Placer p;
  p.SetNode(MakeNode("old", "4.18.0-1"));
  p.SetModule(ModuleFromYaml(LoaderModule("m", R"(      kernelMappings:
        - regexp: '^6\.'
          containerImage: reg/drv:1
)")));
  p.SetModule(ModuleFromYaml(R"(
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: dp, namespace: ns}
spec:
  selector: {}
  devicePlugin:
    container: {image: reg/plugin:1}
)"));
  auto plan = p.PlacementFor("old");
  REQUIRE(plan.has_value());
  CHECK(plan->modules.empty());
  REQUIRE(plan->skipped.size() == 2);
  CHECK(plan->skipped[0].module->Key() == "ns/dp");
  CHECK(plan->skipped[0].reason == SkipReason::kNoModuleLoader);
  CHECK(plan->skipped[1].reason == SkipReason::kNoMapping);
  CHECK(kmodd::placement::DescribeSkip(*plan->skipped[1].module, *plan->node, plan->skipped[1].reason,
                                  plan->skipped[1].detail) ==
        "no kernel mapping matches kernel 4.18.0-1");
}

TEST_CASE("ordered upgrade: the version label decides whether and which version a node runs") {
  const std::string label = "kmm.node.kubernetes.io/version-module.ns.m";
  Placer p;
  p.SetNode(MakeNode("unlabelled", "6.1.0-1"));
  p.SetNode(MakeNode("on-v1", "6.1.0-1", {{label, "1"}}));
  p.SetNode(MakeNode("on-v2", "6.1.0-1", {{label, "2"}}));
  p.SetModule(ModuleFromYaml(LoaderModule("m", Versioned("1"))));
  CHECK(Outcome(p, "unlabelled", "ns/m") == SkipOf(SkipReason::kNoVersionLabel));
  CHECK(Outcome(p, "on-v1", "ns/m") == "run:reg/drv:1");
  // Never planned with version 2, so there is nothing to hold.
  CHECK(Outcome(p, "on-v2", "ns/m") == SkipOf(SkipReason::kVersionMismatch));

  // The Module moves to version 2: nodes still labelled 1 keep version 1.
  auto changed = p.SetModule(ModuleFromYaml(LoaderModule("m", Versioned("2"))));
  CHECK(changed == std::vector<std::string>{"on-v2"});
  CHECK(Outcome(p, "on-v1", "ns/m") == "held:reg/drv:1");
  CHECK(Outcome(p, "on-v2", "ns/m") == "run:reg/drv:2");

  // Relabelling a node moves it; removing the label takes the module away.
  CHECK(p.SetNode(MakeNode("on-v1", "6.1.0-1", {{label, "2"}})) ==
        std::vector<std::string>{"on-v1"});
  CHECK(Outcome(p, "on-v1", "ns/m") == "run:reg/drv:2");
  CHECK(p.SetNode(MakeNode("on-v1", "6.1.0-1")) == std::vector<std::string>{"on-v1"});
  CHECK(Outcome(p, "on-v1", "ns/m") == SkipOf(SkipReason::kNoVersionLabel));
}

TEST_CASE("ordered upgrade does not hold an old version across a kernel change") {
  const std::string label = "kmm.node.kubernetes.io/version-module.ns.m";
  Placer p;
  p.SetNode(MakeNode("n", "6.1.0-1", {{label, "1"}}));
  p.SetModule(ModuleFromYaml(LoaderModule("m", Versioned("1"))));
  p.SetModule(ModuleFromYaml(LoaderModule("m", Versioned("2"))));
  CHECK(Outcome(p, "n", "ns/m") == "held:reg/drv:1");
  p.SetNode(MakeNode("n", "6.1.0-2", {{label, "1"}}));
  CHECK(Outcome(p, "n", "ns/m") == SkipOf(SkipReason::kVersionMismatch));
}

TEST_CASE("re-planning reports only the nodes whose desired modules changed") {
  Placer p;
  p.SetNode(MakeNode("a", "6.1.0-1", {{"role", "x"}}));
  p.SetNode(MakeNode("b", "6.1.0-2", {{"role", "x"}}));
  p.SetNode(MakeNode("c", "6.1.0-1", {{"role", "y"}}));
  const std::string sel = "  selector: {role: x}\n";
  CHECK(p.SetModule(ModuleFromYaml(LoaderModule("m", kAnyKernel, sel))) ==
        std::vector<std::string>{"a", "b"});
  // The same Module again changes nothing.
  CHECK(p.SetModule(ModuleFromYaml(LoaderModule("m", kAnyKernel, sel))).empty());
  // A label change that does not affect selection changes nothing.
  CHECK(p.SetNode(MakeNode("c", "6.1.0-1", {{"role", "z"}})).empty());
  // A kernel change changes that node's image.
  CHECK(p.SetNode(MakeNode("a", "6.1.0-3", {{"role", "x"}})) == std::vector<std::string>{"a"});
  CHECK(Outcome(p, "a", "ns/m") == "run:reg/drv:6.1.0-3");
  // Removing the Module changes every node that ran it.
  CHECK(p.RemoveModule("ns/m") == std::vector<std::string>{"a", "b"});
  CHECK(p.PlacementFor("a")->modules.empty());
  CHECK(p.RemoveNode("c") == std::vector<std::string>{"c"});
  CHECK_FALSE(p.PlacementFor("c").has_value());
  CHECK(p.NodeCount() == 2);
  CHECK(p.ModuleCount() == 0);
}

TEST_CASE("a removed Module's slot is reused without inheriting its decisions") {
  Placer p;
  p.SetNode(MakeNode("a", "6.1.0-1"));
  p.SetModule(ModuleFromYaml(LoaderModule("one", kAnyKernel)));
  p.RemoveModule("ns/one");
  p.SetModule(ModuleFromYaml(LoaderModule("two", kAnyKernel, "  selector: {role: none}\n")));
  auto plan = p.PlacementFor("a");
  REQUIRE(plan.has_value());
  CHECK(plan->modules.empty());
  REQUIRE(plan->skipped.size() == 1);
  CHECK(plan->skipped[0].module->Key() == "ns/two");
}

TEST_CASE("a plan lists modules sorted by namespace/name whatever the input order") {
  std::vector<kmodd::api::Module> mods;
  for (const char* name : {"zeta", "alpha", "mid"}) {
    mods.push_back(ModuleFromYaml(LoaderModule(name, kAnyKernel)));
  }
  auto r = kmodd::placement::PlaceOnce(std::move(mods), {MakeNode("n2", "6.1.0"), MakeNode("n1", "6.1.0")});
  REQUIRE(r.nodes.size() == 2);
  CHECK(r.nodes[0].node->metadata.name == "n1");
  REQUIRE(r.nodes[0].modules.size() == 3);
  CHECK(r.nodes[0].modules[0].module->Key() == "ns/alpha");
  CHECK(r.nodes[0].modules[1].module->Key() == "ns/mid");
  CHECK(r.nodes[0].modules[2].module->Key() == "ns/zeta");
}

TEST_CASE("selectors match whichever of Modules and Nodes arrives first") {
  Placer p;
  p.SetModule(ModuleFromYaml(LoaderModule("by-role", kAnyKernel, "  selector: {role: gpu}\n")));
  CHECK(p.SetNode(MakeNode("a", "6.1.0-1", {{"role", "gpu"}, {"zone", "z1"}})) ==
        std::vector<std::string>{"a"});
  // A Module selecting on a key no Module used before still sees the existing node's label.
  CHECK(p.SetModule(ModuleFromYaml(LoaderModule("by-zone", kAnyKernel, "  selector: {zone: z1}\n"))) ==
        std::vector<std::string>{"a"});
  CHECK(Outcome(p, "a", "ns/by-zone") == "run:reg/drv:6.1.0-1");
  // Relabelling the node moves it between Modules.
  CHECK(p.SetNode(MakeNode("a", "6.1.0-1", {{"role", "cpu"}, {"zone", "z1"}})) ==
        std::vector<std::string>{"a"});
  CHECK(Outcome(p, "a", "ns/by-role") == SkipOf(SkipReason::kSelector));
  CHECK(Outcome(p, "a", "ns/by-zone") == "run:reg/drv:6.1.0-1");
}

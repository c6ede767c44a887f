// The incremental planner against planning from scratch: thousands of random edits (Modules
// and Nodes set, changed and removed), and after each one the incremental plan of every
// node must equal PlaceOnce over the same objects, and the nodes an edit reports as changed
// must be exactly those whose desired modules changed.
//
// History is kept out of the comparison on purpose: a node labelled for another version
// of a Module keeps the version it was planned with before (planner.h), which planning
// from scratch cannot know. So a Module's version never changes for its name here, and a
// node's version label is absent or equal to it; everything else (selectors, taints,
// kernels, mappings, images, in-tree removals) varies freely.

#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "controller/placement/placer.h"
#include "placement_fixtures.h"

using kmodd::placement::NodePlacement;
using kmodd::placement::Placer;
using kmodd::placement::PlaceOnce;
using kmodd::testing::MakeNode;
using kmodd::testing::ModuleFromYaml;

namespace {

constexpr int kModuleNames = 6;
constexpr int kNodeNames = 12;
const std::vector<std::string> kKernels = {"6.1.0-1-amd64", "6.1.0-2-amd64", "6.12.9+",
                                           "5.10.0-9-cloud", ""};
const std::vector<std::string> kRoles = {"gpu", "nic", "storage"};

std::string ModuleName(int i) { return "m" + std::to_string(i); }
// Modules m0 and m3 are versioned; the version is fixed per name (see above).
std::string VersionOf(int i) { return i % 3 == 0 ? "v" + std::to_string(i) : ""; }

class World {
 public:
  explicit World(uint32_t seed) : rng_(seed) {}

  int Pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool Coin(int percent) { return Pick(100) < percent; }

  kmodd::api::Module RandomModule(int i) {
    std::string container;
    if (const std::string v = VersionOf(i); !v.empty()) {
      container += "      version: \"" + v + "\"\n";
    }
    container += "      kernelMappings:\n";
    const int mappings = 1 + Pick(3);
    for (int k = 0; k < mappings; ++k) {
      switch (Pick(3)) {
        case 0:
          container += "        - literal: " + kKernels[Pick(3)] + "\n";
          break;
        case 1:
          container += "        - regexp: '^6\\.1\\..*'\n";
          break;
        default:
          container += "        - regexp: '^.+$'\n";
      }
      container += "          containerImage: reg/" + ModuleName(i) + ":" +
                   std::to_string(Pick(3)) + "-$KERNEL_FULL_VERSION\n";
      if (Coin(30)) {
        container += "          inTreeModulesToRemove: [old" + std::to_string(Pick(2)) + "]\n";
      }
    }
    std::string spec;
    switch (Pick(3)) {
      case 0:
        spec += "  selector: {}\n";
        break;
      case 1:
        spec += "  selector: {role: " + kRoles[Pick(3)] + "}\n";
        break;
      default:
        spec += "  selector: {role: " + kRoles[Pick(3)] + ", zone: z" + std::to_string(Pick(2)) +
                "}\n";
    }
    if (Coin(40)) {
      spec += "  tolerations: [{key: maint, operator: Exists, effect: NoExecute}]\n";
    }
    return ModuleFromYaml(kmodd::testing::LoaderModule(ModuleName(i), container, spec));
  }

  kmodd::api::Node RandomNode(int i) {
    std::map<std::string, std::string> labels;
    if (Coin(80)) {
      labels["role"] = kRoles[Pick(3)];
    }
    if (Coin(60)) {
      labels["zone"] = "z" + std::to_string(Pick(2));
    }
    labels["kubernetes.io/hostname"] = "n" + std::to_string(i);  // a label no Module selects
    for (int m = 0; m < kModuleNames; ++m) {
      if (!VersionOf(m).empty() && Coin(50)) {
        labels["kmm.node.kubernetes.io/version-module.ns." + ModuleName(m)] = VersionOf(m);
      }
    }
    std::vector<kmodd::api::Taint> taints;
    if (Coin(20)) {
      taints.push_back({"maint", "", "NoExecute"});
    }
    if (Coin(15)) {
      taints.push_back({"gone", "", "NoExecute"});
    }
    if (Coin(15)) {
      taints.push_back({"cordon", "", "NoSchedule"});
    }
    return MakeNode("n" + std::to_string(i), kKernels[Pick(static_cast<int>(kKernels.size()))],
                    std::move(labels), std::move(taints));
  }

  std::mt19937 rng_;
  std::map<std::string, kmodd::api::Module> modules;  // key -> current object
  std::map<std::string, kmodd::api::Node> nodes;
};

// A node's desired modules as comparable text: "ns/m=image|held|in-tree,...".
std::string Desired(const NodePlacement& p) {
  std::string out;
  for (const auto& m : p.modules) {
    out += m.module->Key() + "=" + m.config->container_image + "@" + m.config->kernel_version +
           (m.held ? "|held" : "") + "|";
    for (const auto& t : m.config->in_tree_modules_to_remove) {
      out += t + ",";
    }
    out += ";";
  }
  return out;
}

// Desired modules and skip reasons of every node.
std::map<std::string, std::string> Snapshot(const std::vector<NodePlacement>& plans, bool with_skips) {
  std::map<std::string, std::string> out;
  for (const auto& p : plans) {
    std::string s = Desired(p);
    if (with_skips) {
      for (const auto& sk : p.skipped) {
        s += " skip:" + sk.module->Key() + "=" + std::to_string(static_cast<int>(sk.reason));
      }
    }
    out[p.node->metadata.name] = s;
  }
  return out;
}

}  // namespace

TEST_CASE("incremental planning equals planning from scratch after every random edit") {
  const uint32_t seed = GENERATE(1u, 2u, 3u, 20261202u);
  INFO("seed " << seed);
  World w(seed);
  Placer p;
  std::map<std::string, std::string> before;  // desired modules per node, before the edit
  int changed_reports = 0;
  for (int step = 0; step < 1500; ++step) {
    std::vector<std::string> changed;
    std::string what;
    const int op = w.Pick(10);
    if (op < 4) {
      const int i = w.Pick(kModuleNames);
      auto m = w.RandomModule(i);
      what = "SetModule " + m.Key();
      w.modules.insert_or_assign(m.Key(), m);
      changed = p.SetModule(std::move(m));
    } else if (op < 5) {
      const std::string key = "ns/" + ModuleName(w.Pick(kModuleNames));
      what = "RemoveModule " + key;
      w.modules.erase(key);
      changed = p.RemoveModule(key);
    } else if (op < 9) {
      const int i = w.Pick(kNodeNames);
      auto n = w.RandomNode(i);
      what = "SetNode " + n.metadata.name;
      w.nodes.insert_or_assign(n.metadata.name, n);
      changed = p.SetNode(std::move(n));
    } else {
      const std::string name = "n" + std::to_string(w.Pick(kNodeNames));
      what = "RemoveNode " + name;
      w.nodes.erase(name);
      changed = p.RemoveNode(name);
    }
    INFO("step " << step << ": " << what);

    std::vector<kmodd::api::Module> mods;
    for (const auto& [k, m] : w.modules) {
      mods.push_back(m);
    }
    std::vector<kmodd::api::Node> nodes;
    for (const auto& [k, n] : w.nodes) {
      nodes.push_back(n);
    }
    const auto scratch = PlaceOnce(std::move(mods), std::move(nodes));
    const auto incremental = p.AllPlacements();
    REQUIRE(Snapshot(incremental, true) == Snapshot(scratch.nodes, true));

    // The changed list: exactly the nodes, present before and after, whose desired modules
    // differ. (A node added or removed is reported or not as the planner documents: a new
    // node with nothing to run is not a change to push; compare only nodes on both sides.)
    const auto after = Snapshot(incremental, false);
    std::vector<std::string> expected;
    for (const auto& [name, desired] : after) {
      auto it = before.find(name);
      if (it != before.end() && it->second != desired) {
        expected.push_back(name);
      }
    }
    std::vector<std::string> reported;
    for (const auto& name : changed) {
      if (before.count(name) != 0 && after.count(name) != 0) {
        reported.push_back(name);
      }
    }
    CHECK(reported == expected);
    changed_reports += static_cast<int>(!expected.empty());
    before = after;
  }
  CHECK(changed_reports > 100);  // the walk really moved desired state around
}

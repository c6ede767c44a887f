// Placer benchmark: 5,000 nodes x 100 Modules, mixed literal and regexp mappings over 20
// distinct kernels. Measures a full plan from nothing, and re-planning after one Module or
// one Node changes. Prints medians and 90th percentiles of repeated runs.
//
//   taskset -c 0 build/bin/placement_bench [--nodes N] [--modules M] [--runs R]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "api/decode.h"
#include "common/flags.h"
#include "controller/placement/placer.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string Kernel(int k) {
  // Ten Debian-like and ten RHEL-like kernels.
  if (k < 10) {
    return "6.1.0-" + std::to_string(20 + k) + "-cloud-amd64";
  }
  return "5.14.0-427." + std::to_string(k) + ".1.el9_4.x86_64";
}

const char* const kRoles[] = {"gpu", "nic", "storage", "worker"};

kmodd::api::Module MakeModule(int i, const std::string& tag) {
  // Selectors: a quarter of the fleet (role), or a fiftieth (pool), or role+zone.
  std::string selector;
  switch (i % 3) {
    case 0: selector = std::string("{role: ") + kRoles[i % 4] + "}"; break;
    case 1: selector = "{pool: pool-" + std::to_string(i % 50) + "}"; break;
    default:
      selector = std::string("{role: ") + kRoles[i % 4] + ", zone: zone-" + std::to_string(i % 5) + "}";
  }
  std::string yaml =
      "apiVersion: kmm.sigs.x-k8s.io/v1beta1\nkind: Module\n"
      "metadata: {name: mod-" + std::to_string(i) + ", namespace: ns-" + std::to_string(i % 7) +
      "}\nspec:\n  selector: " + selector +
      "\n  moduleLoader:\n    container:\n"
      "      modprobe: {moduleName: drv_" + std::to_string(i) + "}\n"
      "      containerImage: reg.example/drv-" + std::to_string(i) + ":" + tag + "-$KERNEL_FULL_VERSION\n"
      "      kernelMappings:\n"
      "        - literal: " + Kernel(i % 20) + "\n"
      "          containerImage: reg.example/pinned-" + std::to_string(i) + ":" + tag + "\n"
      "        - regexp: '^6\\.1\\.0-2[0-4]-cloud-amd64$'\n"
      "          containerImage: ''\n"  // the container's image
      "        - regexp: '^5\\.14\\.0-427\\.1[0-4]\\..*\\.el9.*\\.x86_64$'\n"
      "          containerImage: reg.example/el9-" + std::to_string(i) + ":${KERNEL_XYZ}-" + tag + "\n"
      "        - regexp: '^.+$'\n"
      "          containerImage: ''\n";
  auto m = kmodd::api::DecodeModule(yaml);
  if (!m.ok()) {
    std::fprintf(stderr, "bench module does not decode: %s\n", std::string(m.status().message()).c_str());
    std::exit(1);
  }
  return *m;
}

kmodd::api::Node MakeNode(int i, int kernel_shift) {
  kmodd::api::Node n;
  n.metadata.name = "node-" + std::to_string(100000 + i);
  n.metadata.labels = {{"role", kRoles[i % 4]},
                       {"zone", "zone-" + std::to_string(i % 5)},
                       {"pool", "pool-" + std::to_string(i % 50)},
                       {"kubernetes.io/hostname", n.metadata.name}};
  n.node_info.kernel_version = Kernel((i + kernel_shift) % 20);
  n.node_info.architecture = "amd64";
  return n;
}

struct Stats {
  double median_ms;
  double p90_ms;
};

Stats Summarise(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[std::min(ms.size() - 1, ms.size() * 9 / 10)]};
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

int main(int argc, char** argv) {
  int nodes = 5000;
  int modules = 100;
  int runs = 15;
  kmodd::flags::FlagSet flags("placement_bench",
                              "usage: placement_bench [--nodes N] [--modules M] [--runs R]\n");
  flags.Int("--nodes", "N", "nodes (default 5000)", &nodes, {1});
  flags.Int("--modules", "M", "Modules (default 100)", &modules, {1});
  flags.Int("--runs", "R", "runs of each measure (default 15)", &runs, {1});
  if (std::optional<int> exit =
          flags.ParseOrExit(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr)) {
    return *exit;
  }
  std::vector<kmodd::api::Module> mods;
  mods.reserve(modules);
  for (int i = 0; i < modules; ++i) {
    mods.push_back(MakeModule(i, "v1"));
  }
  std::vector<kmodd::api::Node> ns;
  ns.reserve(nodes);
  for (int i = 0; i < nodes; ++i) {
    ns.push_back(MakeNode(i, 0));
  }

  std::vector<double> full;
  std::vector<double> full_with_plans;
  size_t running = 0;
  for (int r = 0; r < runs; ++r) {
    auto m = mods;
    auto n = ns;
    const auto t0 = Clock::now();
    kmodd::placement::Placer p;
    for (auto& node : n) {
      p.SetNode(std::move(node));
    }
    for (auto& mod : m) {
      p.SetModule(std::move(mod));
    }
    const auto t1 = Clock::now();
    auto plans = p.AllPlacements();
    const auto t2 = Clock::now();
    full.push_back(Ms(t1 - t0));
    full_with_plans.push_back(Ms(t2 - t0));
    running = 0;
    for (const auto& pl : plans) {
      running += pl.modules.size();
    }
  }

  // Incremental: one planner, then alternate one Module's image tag / one Node's kernel.
  kmodd::placement::Placer p;
  for (const auto& node : ns) {
    p.SetNode(node);
  }
  for (const auto& mod : mods) {
    p.SetModule(mod);
  }
  std::vector<double> one_module;
  std::vector<double> one_node;
  size_t module_changed_nodes = 0;
  const int inc_runs = runs * 20;
  for (int r = 0; r < inc_runs; ++r) {
    const int idx = r % modules;
    auto changed_mod = MakeModule(idx, r % 2 == 0 ? "v2" : "v1");
    const auto t0 = Clock::now();
    auto changed = p.SetModule(std::move(changed_mod));
    one_module.push_back(Ms(Clock::now() - t0));
    module_changed_nodes = std::max(module_changed_nodes, changed.size());

    auto changed_node = MakeNode(r % nodes, 1 + r % 19);
    const auto t1 = Clock::now();
    auto changed_n = p.SetNode(std::move(changed_node));
    auto plan = p.PlacementFor(changed_n.empty() ? ns[0].metadata.name : changed_n.front());
    one_node.push_back(Ms(Clock::now() - t1));
  }

  const Stats f = Summarise(full);
  const Stats fp = Summarise(full_with_plans);
  const Stats om = Summarise(one_module);
  const Stats on = Summarise(one_node);
  std::printf("planner bench: %d nodes x %d Modules, 20 kernels; %zu (node, module) pairs run\n",
              nodes, modules, running);
  std::printf("%-44s %10s %10s %6s\n", "case", "median ms", "p90 ms", "runs");
  std::printf("%-44s %10.3f %10.3f %6d\n", "full plan (all decisions)", f.median_ms, f.p90_ms, runs);
  std::printf("%-44s %10.3f %10.3f %6d\n", "full plan + every NodePlacement built", fp.median_ms, fp.p90_ms, runs);
  std::printf("%-44s %10.3f %10.3f %6d\n", "re-plan after one Module changed", om.median_ms, om.p90_ms, inc_runs);
  std::printf("%-44s %10.3f %10.3f %6d\n", "re-plan after one Node changed (+its plan)", on.median_ms, on.p90_ms, inc_runs);
  std::printf("largest set of nodes changed by one Module: %zu\n", module_changed_nodes);
  return 0;
}

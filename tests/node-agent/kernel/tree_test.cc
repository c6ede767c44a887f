#include <catch2/catch.hpp>

#include "node-agent/kernel/tree.h"

using kmodd::kernel::CheckVermagic;
using kmodd::kernel::DriverTree;
using kmodd::kernel::LoadStep;
using kmodd::kernel::PlanLoad;
using kmodd::kernel::TreeModule;

namespace {

TreeModule Mod(std::string name, std::vector<std::string> deps = {},
               std::vector<std::string> pre = {}, std::vector<std::string> post = {}) {
  TreeModule m;
  m.name = name;
  m.path = "/t/" + name + ".ko";
  m.depends = std::move(deps);
  m.softdep_pre = std::move(pre);
  m.softdep_post = std::move(post);
  return m;
}

const kmodd::kernel::HostLookup kHost = [](const std::string& name)
    -> absl::StatusOr<std::optional<std::string>> {
  if (name == "drm" || name == "mii") {
    return std::optional<std::string>("/lib/modules/k/kernel/" + name + ".ko");
  }
  return std::optional<std::string>();
};

std::vector<std::string> Names(const std::vector<LoadStep>& steps) {
  std::vector<std::string> out;
  for (const auto& s : steps) {
    out.push_back(std::string(s.source == LoadStep::Source::kHost ? "host:" : "") + s.name);
  }
  return out;
}

}  // namespace

TEST_CASE("load planning puts dependencies and softdep pre first, post after, each once") {
  const DriverTree tree = DriverTree::FromModules(
      "/t", {Mod("gpu", {"gpu_core", "drm"}, {"gpu_fw"}, {"gpu_extra"}),
             Mod("gpu_core", {"drm"}), Mod("gpu_fw"), Mod("gpu_extra", {"gpu_core"})});
  auto steps = PlanLoad(tree, {"gpu"}, "gpu", "a=1", kHost);
  REQUIRE(steps.ok());
  CHECK(Names(*steps) ==
        std::vector<std::string>{"gpu_fw", "host:drm", "gpu_core", "gpu", "gpu_extra"});
  // Only the Module's own moduleName gets the parameters.
  for (const auto& s : *steps) {
    CHECK(s.params == (s.name == "gpu" ? "a=1" : ""));
  }
}

TEST_CASE("load planning follows modulesLoadingOrder (given last to first)") {
  const DriverTree tree =
      DriverTree::FromModules("/t", {Mod("xe"), Mod("drm_exec"), Mod("drm_gpuvm")});
  // modulesLoadingOrder [xe, drm_gpuvm, drm_exec] loads drm_exec, drm_gpuvm, xe.
  auto steps = PlanLoad(tree, {"drm_exec", "drm_gpuvm", "xe"}, "xe", "", kHost);
  REQUIRE(steps.ok());
  CHECK(Names(*steps) == std::vector<std::string>{"drm_exec", "drm_gpuvm", "xe"});
}

TEST_CASE("the Module's own modules must come from its image, never from the host") {
  const DriverTree tree = DriverTree::FromModules("/t", {Mod("other")});
  auto steps = PlanLoad(tree, {"drm"}, "drm", "", kHost);
  REQUIRE_FALSE(steps.ok());
  CHECK(std::string(steps.status().message()) ==
        "module drm is not in the driver tree /t (it has: other)");
}

TEST_CASE("load planning names a dependency found nowhere, and a cycle") {
  auto missing = PlanLoad(DriverTree::FromModules("/t", {Mod("a", {"ghost"})}), {"a"}, "a", "", kHost);
  REQUIRE_FALSE(missing.ok());
  CHECK(std::string(missing.status().message()).find("ghost (needed by a)") != std::string::npos);
  auto cycle = PlanLoad(DriverTree::FromModules("/t", {Mod("a", {"b"}), Mod("b", {"a"})}), {"a"},
                        "a", "", kHost);
  REQUIRE_FALSE(cycle.ok());
  CHECK(std::string(cycle.status().message()).find("dependency cycle") != std::string::npos);
}

TEST_CASE("vermagic is compared as the kernel does: after the release only with modversions") {
  const std::string kernel = "6.1.0-57-cloud-amd64 SMP preempt mod_unload modversions ";
  TreeModule m = Mod("a");
  m.vermagic = "6.1.0-56-cloud-amd64 SMP preempt mod_unload modversions ";
  m.has_modversions = true;
  CHECK(CheckVermagic(m, kernel).ok());  // another ABI-compatible release loads
  m.has_modversions = false;
  CHECK_FALSE(CheckVermagic(m, kernel).ok());  // without CRCs the whole string must match
  m.vermagic = kernel;
  CHECK(CheckVermagic(m, kernel).ok());
  m.vermagic = "6.1.0-57-cloud-amd64 SMP preempt mod_unload ";
  m.has_modversions = true;
  auto s = CheckVermagic(m, kernel);
  REQUIRE_FALSE(s.ok());
  CHECK(std::string(s.message()).find("vermagic mismatch for a") != std::string::npos);
}

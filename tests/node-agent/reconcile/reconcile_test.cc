#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>

#include "../fake_kernel.h"
#include "node-agent/reconcile/executor.h"
#include "node-agent/reconcile/action_planner.h"
#include "tests/temp_dir.h"

using kmodd::testing::TempDir;

using kmodd::kernel::LoadStep;
using kmodd::reconcile::Action;
using kmodd::reconcile::DesiredModule;
using kmodd::reconcile::Executor;
using kmodd::reconcile::Journal;
using kmodd::api::Phase;
using kmodd::reconcile::PlanActions;
using kmodd::testing::FakeFirmware;
using kmodd::testing::FakeKernel;

namespace {

LoadStep Tree(const std::string& name, const std::string& params = "") {
  return LoadStep{name, LoadStep::Source::kTree, "/img/opt/lib/modules/6.1.0-test/" + name + ".ko",
                  params};
}

// A GPU-like Module: helper modules then the main one, replacing an in-tree namesake.
DesiredModule Gpu(const std::string& fingerprint = "v1") {
  DesiredModule d;
  d.key = "gpu/xe";
  d.source = "dir:/img";
  d.fingerprint = fingerprint;
  d.tree = "/img/opt/lib/modules/6.1.0-test";
  d.steps = {Tree("drm_exec"), Tree("xe", "force_probe=*")};
  d.unload_order = {"xe", "drm_exec"};
  d.in_tree_remove = {"xe"};
  d.firmware_source = "/img/firmware";
  return d;
}

std::vector<Action::Kind> Kinds(const std::vector<Action>& actions) {
  std::vector<Action::Kind> out;
  for (const auto& a : actions) {
    out.push_back(a.kind);
  }
  return out;
}

struct Rig {
  TempDir dir{"reconcile"};
  FakeKernel kernel;
  FakeFirmware firmware;
  Journal journal;
  Executor exec{kernel, &firmware, dir.path + "/journal.json", journal};

  Rig() {
    kernel.host = {"xe", "i915", "drm_buddy", "mei"};
    kernel.deps["xe"] = {"drm_exec"};
  }
  std::vector<Action> Plan(const std::vector<DesiredModule>& desired) {
    return PlanActions(desired, *kernel.Observe(), journal);
  }
  kmodd::reconcile::Journal OnDisk() { return *kmodd::reconcile::LoadJournal(dir.path + "/journal.json"); }
};

}  // namespace

TEST_CASE("a Module that is not loaded is loaded, and then nothing is left to do") {
  Rig r;
  const DesiredModule d = Gpu();
  REQUIRE(Kinds(r.Plan({d})) == std::vector{Action::Kind::kLoad});
  REQUIRE(r.exec.Load(d).ok());
  CHECK(r.kernel.IsOurs("xe"));
  CHECK(r.kernel.IsOurs("drm_exec"));
  CHECK(r.kernel.loaded["xe"].parameters["params"] == "force_probe=*");
  CHECK(r.firmware.staged.count("gpu/xe") == 1);
  CHECK(r.Plan({d}).empty());
  const auto disk = r.OnDisk();
  CHECK(disk == r.journal);
  const auto& e = disk.modules.at("gpu/xe");
  CHECK(e.phase == Phase::kLoaded);
  CHECK(e.loaded == std::vector<std::string>{"drm_exec", "xe"});
  CHECK(e.firmware == std::vector<std::string>{"firmware/fw.bin"});
}

TEST_CASE("the swap removes the in-tree module and its module holders, then inserts ours") {
  Rig r;
  // In-tree xe is loaded and held by an in-tree helper module.
  r.kernel.host.insert("xe_helper");
  r.kernel.deps["xe_helper"] = {"xe_intree_dep"};
  REQUIRE(r.kernel.InsertHost("drm_buddy", "").ok());
  r.kernel.loaded["xe"] = kmodd::kernel::LoadedModule{"xe", {}, 0, {}, "", "", "", {}};
  r.kernel.deps["xe_holder"] = {"xe"};
  r.kernel.host.insert("xe_holder");
  r.kernel.loaded["xe_holder"] = kmodd::kernel::LoadedModule{"xe_holder", {}, 0, {}, "", "", "", {}};
  REQUIRE(r.exec.Load(Gpu()).ok());
  CHECK(r.kernel.IsOurs("xe"));
  CHECK_FALSE(r.kernel.IsLoaded("xe_holder"));
  CHECK(kmodd::reconcile::InTreeRemovedFor(r.journal, "gpu/xe") ==
        std::vector<std::string>{"xe_holder", "xe"});
}

TEST_CASE("a failed insert rolls the swap back: in-tree module reloaded, ours removed") {
  Rig r;
  r.kernel.deps.erase("xe");  // the in-tree xe, unlike ours, needs no drm_exec
  REQUIRE(r.kernel.InsertHost("xe", "").ok());
  // The image's xe is refused by the kernel (built for another kernel).
  DesiredModule d = Gpu();
  d.steps.back().path = "/img/opt/lib/modules/6.1.0-test/xe_broken.ko";
  r.kernel.fail_insert["xe_broken"] = ENOEXEC;
  const auto s = r.exec.Load(d);
  REQUIRE_FALSE(s.ok());
  CHECK(absl::IsFailedPrecondition(s));
  const std::string msg(s.message());
  CHECK(msg.find("insert xe_broken") != std::string::npos);
  CHECK(msg.find("rolled back: removed drm_exec, reloaded in-tree xe") != std::string::npos);
  // The node is as it was: in-tree xe loaded, nothing of ours.
  CHECK(r.kernel.IsLoaded("xe"));
  CHECK_FALSE(r.kernel.IsOurs("xe"));
  CHECK_FALSE(r.kernel.IsLoaded("drm_exec"));
  const auto disk = r.OnDisk();
  const auto& e = disk.modules.at("gpu/xe");
  CHECK(e.phase == Phase::kFailed);
  CHECK(e.loaded.empty());
  CHECK(disk.in_tree_removed.empty());
  CHECK(e.message == msg);
}

TEST_CASE("an in-tree module in use by something other than a module is never forced") {
  Rig r;
  r.kernel.deps.erase("xe");
  REQUIRE(r.kernel.InsertHost("xe", "").ok());
  r.kernel.extra_refs["xe"] = 1;  // e.g. an open device
  r.kernel.deps["xe"] = {"drm_exec"};
  const auto s = r.exec.Load(Gpu());
  REQUIRE_FALSE(s.ok());
  CHECK(std::string(s.message()).find("in use (refcount 1") != std::string::npos);
  CHECK(r.kernel.IsLoaded("xe"));
  CHECK_FALSE(r.kernel.IsOurs("xe"));
  CHECK_FALSE(r.kernel.IsLoaded("drm_exec"));
}

TEST_CASE("unload removes in reverse load order and releases firmware") {
  Rig r;
  REQUIRE(r.exec.Load(Gpu()).ok());
  REQUIRE(Kinds(r.Plan({})) == std::vector{Action::Kind::kUnload});
  REQUIRE(r.exec.Unload("gpu/xe").ok());
  CHECK(r.kernel.loaded.empty());
  CHECK(r.firmware.staged.empty());
  CHECK(r.OnDisk().modules.empty());
  CHECK(r.Plan({}).empty());
}

TEST_CASE("unload of a module in use is refused with the reason and retried later") {
  Rig r;
  REQUIRE(r.exec.Load(Gpu()).ok());
  r.kernel.extra_refs["xe"] = 2;
  const auto s = r.exec.Unload("gpu/xe");
  REQUIRE_FALSE(s.ok());
  CHECK(absl::IsFailedPrecondition(s));
  CHECK(r.kernel.IsOurs("xe"));
  CHECK(r.journal.modules.at("gpu/xe").phase == Phase::kUnloading);
  r.kernel.extra_refs["xe"] = 0;
  REQUIRE(r.exec.Unload("gpu/xe").ok());
  CHECK(r.kernel.loaded.empty());
}

TEST_CASE("the planner reloads after drift, a configuration change and a reboot") {
  Rig r;
  REQUIRE(r.exec.Load(Gpu()).ok());
  SECTION("someone ran rmmod") {
    r.kernel.loaded.erase("xe");
    const auto actions = r.Plan({Gpu()});
    REQUIRE(actions.size() == 1);
    CHECK(actions[0].why.find("drift") != std::string::npos);
    REQUIRE(r.exec.Load(Gpu()).ok());
    CHECK(r.kernel.inserts["drm_exec"] == 1);  // no double work
    CHECK(r.kernel.inserts["xe"] == 2);
  }
  SECTION("the image changed") {
    CHECK(Kinds(r.Plan({Gpu("v2")})) ==
          std::vector{Action::Kind::kUnload, Action::Kind::kLoad});
  }
  SECTION("the node rebooted: nothing of ours is loaded any more") {
    r.kernel.boot_id = "boot-2";
    r.kernel.loaded.clear();
    CHECK(Kinds(r.Plan({Gpu()})) == std::vector{Action::Kind::kLoad});
    REQUIRE(r.exec.Load(Gpu()).ok());
    CHECK(r.journal.boot_id == "boot-2");
    CHECK(r.journal.modules.at("gpu/xe").loaded == std::vector<std::string>{"drm_exec", "xe"});
  }
  SECTION("a Module whose preparation failed keeps what it ran") {
    DesiredModule broken = Gpu("v2");
    broken.problem = absl::FailedPreconditionError("vermagic mismatch");
    CHECK(r.Plan({broken}).empty());
  }
}

TEST_CASE("a crash after an insert but before the journal said Loaded converges without double work") {
  Rig r;
  // State left by kill -9: the journal recorded the intent for drm_exec and xe, drm_exec
  // made it into the kernel, and the journal still says Loading.
  REQUIRE(r.exec.Load(Gpu()).ok());
  r.kernel.loaded.erase("xe");
  r.journal.modules.at("gpu/xe").phase = Phase::kLoading;
  const auto actions = r.Plan({Gpu()});
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].why == "resuming from Loading");
  REQUIRE(r.exec.Load(Gpu()).ok());
  CHECK(r.kernel.inserts["drm_exec"] == 1);
  CHECK(r.Plan({Gpu()}).empty());
}

TEST_CASE("an empty desired state unloads only what kmodd loaded") {
  Rig r;
  REQUIRE(r.kernel.InsertHost("mei", "").ok());  // someone else's module
  REQUIRE(r.exec.Load(Gpu()).ok());
  REQUIRE(r.exec.Unload("gpu/xe").ok());
  CHECK(r.kernel.IsLoaded("mei"));
  CHECK_FALSE(r.kernel.IsLoaded("xe"));
}

TEST_CASE("rollback also removes our replacement of an in-tree namesake") {
  Rig r;
  r.kernel.host.insert("dummy");
  REQUIRE(r.kernel.InsertHost("dummy", "").ok());
  DesiredModule d;
  d.key = "net/dummy";
  d.fingerprint = "v1";
  d.steps = {Tree("dummy"), Tree("dummy_extra")};
  d.in_tree_remove = {"dummy"};
  r.kernel.fail_insert["dummy_extra"] = EINVAL;
  const auto s = r.exec.Load(d);
  REQUIRE_FALSE(s.ok());
  CHECK(std::string(s.message()).find("removed dummy, reloaded in-tree dummy") != std::string::npos);
  CHECK(r.kernel.IsLoaded("dummy"));
  CHECK_FALSE(r.kernel.IsOurs("dummy"));
  CHECK(r.journal.modules.at("net/dummy").loaded.empty());
}

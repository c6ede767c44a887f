// What happens to the in-tree modules a Module replaced once it goes away: the planner's
// decision (a table) and the executor's doing, against the fake kernel.

#include <catch2/catch.hpp>

#include <algorithm>

#include "../fake_kernel.h"
#include "absl/strings/str_cat.h"
#include "node-agent/reconcile/executor.h"
#include "node-agent/reconcile/action_planner.h"
#include "tests/temp_dir.h"

using kmodd::kernel::KernelState;
using kmodd::kernel::LoadedModule;
using kmodd::kernel::LoadStep;
using kmodd::reconcile::Action;
using kmodd::reconcile::DesiredModule;
using kmodd::reconcile::Executor;
using kmodd::reconcile::InTreeRemoval;
using kmodd::reconcile::Journal;
using kmodd::reconcile::JournalEntry;
using kmodd::api::Phase;
using kmodd::reconcile::PlanActions;
using kmodd::testing::FakeKernel;
using kmodd::testing::FakeFirmware;
using kmodd::testing::TempDir;

namespace {

LoadStep Tree(const std::string& name) {
  return LoadStep{name, LoadStep::Source::kTree, "/img/opt/lib/modules/6.1.0-test/" + name + ".ko",
                  ""};
}

// A Module `key` that loads OOT `module` and removes `in_tree` first.
DesiredModule Replacing(const std::string& key, const std::string& module,
                        std::vector<std::string> in_tree, const std::string& fingerprint = "v1") {
  DesiredModule d;
  d.key = key;
  d.source = "dir:/img";
  d.fingerprint = fingerprint;
  d.steps = {Tree(module)};
  d.unload_order = {module};
  d.in_tree_remove = std::move(in_tree);
  return d;
}

LoadedModule Mod(const std::string& name, bool oot) {
  LoadedModule m;
  m.name = name;
  m.taint = oot ? "O" : "";
  return m;
}

// One row: what the journal records, what is desired, what the kernel has; the plan.
struct Row {
  const char* name;
  std::vector<InTreeRemoval> removed;       // the journal's in-tree records, removal order
  std::vector<std::string> journal_loaded;  // Modules the journal has loaded ("v1")
  std::vector<DesiredModule> desired;
  std::vector<LoadedModule> kernel;
  std::vector<std::string> want;  // "<kind> <key>", in order
  std::string journal_boot = "boot-1";
};

std::vector<std::string> Plan(const Row& row) {
  Journal j;
  j.boot_id = row.journal_boot;
  j.in_tree_removed = row.removed;
  for (const auto& key : row.journal_loaded) {
    JournalEntry e;
    e.fingerprint = "v1";
    e.phase = Phase::kLoaded;
    e.loaded = {"oot_" + key.substr(key.find('/') + 1)};
    j.modules[key] = e;
  }
  KernelState k;
  k.release = "6.1.0-test";
  k.boot_id = "boot-1";
  k.modules = row.kernel;
  std::sort(k.modules.begin(), k.modules.end(),
            [](const LoadedModule& a, const LoadedModule& b) { return a.name < b.name; });
  std::vector<std::string> out;
  for (const auto& a : PlanActions(row.desired, k, j)) {
    out.push_back(absl::StrCat(kmodd::reconcile::KindName(a.kind), " ", a.key));
  }
  return out;
}

}  // namespace

TEST_CASE("the planner reloads the in-tree modules a Module removed once nothing removes them") {
  const InTreeRemoval dummy{"dummy", "dummy", "net/nic"};
  const DesiredModule nic = Replacing("net/nic", "oot_nic", {"dummy"});
  const DesiredModule other = Replacing("net/other", "oot_other", {"dummy"});
  DesiredModule pulling;  // as the reconciler prepares a Module whose image is being pulled
  pulling.key = "net/other";
  pulling.in_tree_remove = {"dummy"};
  pulling.problem = absl::UnavailableError("pulling");
  const std::vector<Row> rows = {
      {"a Module that removed an in-tree module is deleted: unload it, then reload the module",
       {dummy}, {"net/nic"}, {}, {Mod("oot_nic", true)},
       {"unload net/nic", "reload-in-tree dummy"}},
      {"another desired Module still removes it: it stays out",
       {dummy}, {"net/nic", "net/other"}, {other}, {Mod("oot_nic", true), Mod("oot_other", true)},
       {"unload net/nic"}},
      {"so does one whose image is still being pulled (fail-static)",
       {dummy}, {"net/nic"}, {pulling}, {Mod("oot_nic", true)},
       {"unload net/nic"}},
      {"the Module is still desired: nothing to do",
       {dummy}, {"net/nic"}, {nic}, {Mod("oot_nic", true)}, {}},
      {"a holder removed for its target goes back after it, last removed first",
       {{"xe_holder", "xe", "gpu/xe"}, {"xe", "xe", "gpu/xe"}, {"snd_x", "snd_x", "gpu/xe"}},
       {"gpu/xe"}, {}, {},
       {"unload gpu/xe", "reload-in-tree snd_x", "reload-in-tree xe", "reload-in-tree xe_holder"}},
      {"a holder stays out while its target does: reloading it would load the target",
       {{"xe_holder", "xe", "gpu/xe"}, {"xe", "xe", "gpu/xe"}}, {"gpu/xe"},
       {Replacing("gpu/xe2", "oot_xe2", {"xe"})}, {},
       {"unload gpu/xe", "load gpu/xe2"}},
      {"names are compared as the kernel does ('-' is '_')",
       {{"snd_hda", "snd_hda", "a/b"}}, {"a/b"}, {Replacing("c/d", "oot_d", {"snd-hda"})}, {},
       {"unload a/b", "load c/d"}},
      {"the configuration changed and no longer removes it: reloaded between unload and load",
       {dummy}, {"net/nic"}, {Replacing("net/nic", "oot_nic", {}, "v2")}, {Mod("oot_nic", true)},
       {"unload net/nic", "reload-in-tree dummy", "load net/nic"}},
      {"the configuration changed and still removes it: it stays out across the swap",
       {dummy}, {"net/nic"}, {Replacing("net/nic", "oot_nic", {"dummy"}, "v2")},
       {Mod("oot_nic", true)}, {"unload net/nic", "load net/nic"}},
      {"a restart after the unload left only the record: reloaded",
       {dummy}, {}, {}, {}, {"reload-in-tree dummy"}},
      {"loaded again outside kmodd: still planned, so that the record goes",
       {dummy}, {}, {}, {Mod("dummy", false)}, {"reload-in-tree dummy"}},
      {"records of another boot are not acted on",
       {dummy}, {}, {}, {}, {}, "boot-0"},
  };
  for (const Row& row : rows) {
    INFO(row.name);
    CHECK(Plan(row) == row.want);
  }
}

namespace {

struct Rig {
  TempDir dir{"in-tree-reload"};
  FakeKernel kernel;
  FakeFirmware firmware;
  Journal journal;
  std::unique_ptr<Executor> exec;

  Rig() {
    kernel.host = {"dummy", "xe", "xe_holder"};
    kernel.deps["xe_holder"] = {"xe"};
    REQUIRE(kernel.InsertHost("dummy", "").ok());
    Restart(journal);
  }
  std::string JournalPath() const { return dir.path + "/journal.json"; }
  // A new executor on `j`, as a restarted agent has.
  void Restart(const Journal& j) {
    journal = j;
    exec = std::make_unique<Executor>(kernel, &firmware, JournalPath(), journal);
  }
  // Plans and runs until nothing is left to do (at most a few rounds); the last errors.
  std::vector<std::string> Converge(const std::vector<DesiredModule>& desired) {
    std::vector<std::string> errors;
    for (int round = 0; round < 3; ++round) {
      const auto actions = PlanActions(desired, *kernel.Observe(), journal);
      if (actions.empty()) {
        break;
      }
      errors.clear();
      for (const auto& a : actions) {
        if (auto s = exec->Run(a, desired); !s.ok()) {
          errors.push_back(std::string(s.message()));
        }
      }
    }
    return errors;
  }
  bool InTreeLoaded(const std::string& m) { return kernel.IsLoaded(m) && !kernel.IsOurs(m); }
};

}  // namespace

TEST_CASE("deleting a Module that replaced an in-tree module loads the in-tree one again") {
  Rig r;
  const DesiredModule nic = Replacing("net/nic", "dummy", {"dummy"});
  REQUIRE(r.Converge({nic}).empty());
  REQUIRE(r.kernel.IsOurs("dummy"));
  CHECK(kmodd::reconcile::InTreeRemovedFor(r.journal, "net/nic") ==
        std::vector<std::string>{"dummy"});
  CHECK(r.Converge({}).empty());
  CHECK(r.InTreeLoaded("dummy"));
  CHECK(r.journal.modules.empty());
  CHECK(r.journal.in_tree_removed.empty());
  CHECK(*kmodd::reconcile::LoadJournal(r.JournalPath()) == r.journal);
}

TEST_CASE("an in-tree module another desired Module removes stays out, and goes back with it") {
  Rig r;
  const DesiredModule nic = Replacing("net/nic", "dummy", {"dummy"});
  const DesiredModule other = Replacing("net/other", "other", {"dummy"});
  REQUIRE(r.Converge({nic, other}).empty());
  CHECK(r.Converge({other}).empty());
  CHECK_FALSE(r.kernel.IsLoaded("dummy"));
  CHECK(r.Converge({}).empty());
  CHECK(r.InTreeLoaded("dummy"));
}

TEST_CASE("an agent restarted between the removal and the deletion still reloads") {
  Rig r;
  r.kernel.loaded.erase("dummy");
  REQUIRE(r.kernel.InsertHost("xe_holder", "").ok());  // loads xe, which it holds
  REQUIRE(r.Converge({Replacing("gpu/xe", "xe", {"xe"})}).empty());
  REQUIRE(r.kernel.IsOurs("xe"));
  REQUIRE_FALSE(r.kernel.IsLoaded("xe_holder"));
  // What the next agent reads is only what is on disk.
  auto disk = kmodd::reconcile::LoadJournal(r.JournalPath());
  REQUIRE(disk.ok());
  CHECK(disk->in_tree_removed ==
        std::vector<InTreeRemoval>{{"xe_holder", "xe", "gpu/xe"}, {"xe", "xe", "gpu/xe"}});
  r.Restart(*disk);
  CHECK(r.Converge({}).empty());
  CHECK(r.InTreeLoaded("xe"));
  CHECK(r.InTreeLoaded("xe_holder"));
}

TEST_CASE("a journal from before the node-level record still reloads what it removed") {
  const std::string old = R"({"version": 1, "bootId": "boot-1", "modules": {"net/nic": {
      "fingerprint": "v1", "phase": "Loaded", "loaded": ["dummy"],
      "inTreeRemoved": ["dummy"], "firmware": []}}})";
  auto j = kmodd::reconcile::DecodeJournal(old, "journal.json");
  REQUIRE(j.ok());
  CHECK(j->in_tree_removed == std::vector<InTreeRemoval>{{"dummy", "dummy", "net/nic"}});
}

TEST_CASE("a reload that fails is reported and never holds back the unload") {
  Rig r;
  REQUIRE(r.Converge({Replacing("net/nic", "dummy", {"dummy"})}).empty());
  SECTION("not permitted") {
    r.kernel.fail_insert["dummy"] = EPERM;
    r.kernel.host.insert("dummy");
  }
  SECTION("no longer in the host's tree") { r.kernel.host.erase("dummy"); }
  const auto errors = r.Converge({});
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].find("reloading in-tree module dummy (removed for net/nic)") !=
        std::string::npos);
  // The Module is gone; the record stays, so the reload is tried again later.
  CHECK_FALSE(r.kernel.IsLoaded("dummy"));
  CHECK(r.journal.modules.empty());
  CHECK(r.journal.in_tree_removed.size() == 1);
  r.kernel.fail_insert.clear();
  r.kernel.host.insert("dummy");
  CHECK(r.Converge({}).empty());
  CHECK(r.InTreeLoaded("dummy"));
}

TEST_CASE("a reload waits while an out-of-tree namesake is still loaded") {
  Rig r;
  REQUIRE(r.Converge({Replacing("net/nic", "dummy", {"dummy"})}).empty());
  r.kernel.extra_refs["dummy"] = 1;  // ours is in use: its unload fails
  const auto errors = r.Converge({});
  REQUIRE(errors.size() == 2);
  CHECK(errors[1].find("cannot be loaded again while an out-of-tree module") != std::string::npos);
  CHECK(r.kernel.IsOurs("dummy"));
  r.kernel.extra_refs.clear();
  CHECK(r.Converge({}).empty());
  CHECK(r.InTreeLoaded("dummy"));
}

TEST_CASE("a failed swap's rollback drops the records of what it loaded back") {
  Rig r;
  DesiredModule d = Replacing("net/nic", "dummy", {"dummy"});
  d.steps.push_back(Tree("dummy_extra"));
  r.kernel.fail_insert["dummy_extra"] = EINVAL;
  REQUIRE_FALSE(r.exec->Load(d).ok());
  CHECK(r.InTreeLoaded("dummy"));
  CHECK(r.journal.in_tree_removed.empty());
  CHECK(kmodd::reconcile::LoadJournal(r.JournalPath())->in_tree_removed.empty());
}

TEST_CASE("a reboot forgets the in-tree records: that kernel loaded its own modules") {
  Journal j;
  j.boot_id = "boot-1";
  j.in_tree_removed = {{"dummy", "dummy", "net/nic"}};
  kmodd::reconcile::ForgetBoot(j, "boot-2");
  CHECK(j.in_tree_removed.empty());
}

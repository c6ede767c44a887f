#include "node-agent/reconcile/executor.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kmodd::reconcile {

namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

Executor::Executor(kernel::Kernel& kernel, FirmwareStore* firmware, std::string journal_path,
                   Journal& journal)
    : kernel_(kernel), firmware_(firmware), journal_path_(std::move(journal_path)),
      journal_(journal) {}

absl::Status Executor::Save() { return SaveJournal(journal_path_, journal_); }

absl::Status Executor::Fail(const std::string& key, absl::Status s) {
  JournalEntry& e = journal_.modules[key];
  e.phase = api::Phase::kFailed;
  e.message = std::string(s.message());
  if (auto saved = Save(); !saved.ok()) {
    return saved;
  }
  return s;
}

// Removes an in-tree module and, first, the modules that hold it, deepest first. Never
// forces: a module in use by something other than a module fails the whole action. Each
// removal is recorded before the syscall (intent), so that kill -9 cannot lose the record
// of an in-tree module kmodd owes back; a record of a module still loaded is harmless.
absl::Status Executor::RemoveInTree(const std::string& name, const std::string& target,
                                    const std::string& key, const kernel::KernelState& observed,
                                    std::vector<std::string>& removed) {
  const kernel::LoadedModule* m = observed.Find(name);
  if (m == nullptr || Contains(removed, m->name)) {
    return absl::OkStatus();
  }
  if (m->OutOfTree()) {
    return absl::OkStatus();  // not the in-tree module: ours, or another OOT namesake
  }
  auto host = kernel_.HostModulePath(m->name);
  if (!host.ok()) {
    return host.status();
  }
  if (!host->has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "in-tree module ", m->name, " is loaded but is not a module of the running kernel's "
        "tree; kmodd removes only the running kernel's own modules"));
  }
  for (const auto& holder : m->holders) {
    if (auto s = RemoveInTree(holder, target, key, observed, removed); !s.ok()) {
      return s;
    }
  }
  if (m->refcount > static_cast<int>(m->holders.size())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "in-tree module ", m->name, " is in use (refcount ", m->refcount,
        m->holders.empty() ? "" : ", holders " + absl::StrJoin(m->holders, ", "),
        "); it is never forced: stop its users and kmodd will retry"));
  }
  const bool recorded = AddRemoval(journal_, {m->name, target, key});
  if (recorded) {
    if (auto s = Save(); !s.ok()) {
      return s;
    }
  }
  if (auto s = kernel_.Remove(m->name); !s.ok()) {
    if (recorded && DropRemoval(journal_, m->name)) {
      (void)Save();  // best effort: a stale record of a loaded module is dropped on reload
    }
    return s;
  }
  removed.push_back(m->name);
  return absl::OkStatus();
}

std::vector<std::string> Executor::Rollback(const std::vector<std::string>& inserted,
                                            const std::vector<std::string>& removed,
                                            std::string& report) {
  std::vector<std::string> undone;
  std::vector<std::string> stuck;
  for (auto it = inserted.rbegin(); it != inserted.rend(); ++it) {
    if (auto s = kernel_.Remove(*it); s.ok()) {
      undone.push_back("removed " + *it);
    } else {
      undone.push_back(absl::StrCat("could not remove ", *it, " (", s.message(), ")"));
      stuck.push_back(*it);
    }
  }
  for (auto it = removed.rbegin(); it != removed.rend(); ++it) {
    if (auto s = kernel_.InsertHost(*it, ""); s.ok()) {
      undone.push_back("reloaded in-tree " + *it);
      DropRemoval(journal_, *it);
    } else {
      // The record stays: the action planner reloads it once no desired Module removes it.
      undone.push_back(absl::StrCat("could not reload in-tree ", *it, " (", s.message(), ")"));
    }
  }
  if (!undone.empty()) {
    absl::StrAppend(&report, "; rolled back: ", absl::StrJoin(undone, ", "));
  }
  return stuck;
}

absl::Status Executor::Load(const DesiredModule& d) {
  auto observed = kernel_.Observe();
  if (!observed.ok()) {
    return observed.status();
  }
  ForgetBoot(journal_, observed->boot_id);
  JournalEntry& e = journal_.modules[d.key];
  e.fingerprint = d.fingerprint;
  e.source = d.source;
  e.tree = d.tree;
  e.phase = api::Phase::kLoading;
  e.message.clear();
  if (auto s = Save(); !s.ok()) {
    return s;
  }
  if (!d.firmware_source.empty()) {
    if (firmware_ == nullptr) {
      return Fail(d.key, absl::FailedPreconditionError("firmware staging is not configured"));
    }
    auto staged = firmware_->Stage(d.key, d.firmware_source);
    if (!staged.ok()) {
      return Fail(d.key, staged.status());
    }
    journal_.modules[d.key].firmware = *staged;
    if (auto s = Save(); !s.ok()) {
      return s;
    }
  }
  // The swap: in-tree modules out, our modules in, or neither.
  std::vector<std::string> removed;
  for (const auto& name : d.in_tree_remove) {
    const kernel::LoadedModule* target = observed->Find(name);
    if (auto s = RemoveInTree(name, target != nullptr ? target->name : name, d.key, *observed,
                              removed);
        !s.ok()) {
      std::string report(s.message());
      (void)Rollback({}, removed, report);
      return Fail(d.key, absl::Status(s.code(), report));
    }
  }
  // Each module is recorded before its insert (intent), so that kill -9 between the
  // syscall and the journal write cannot leave a module of ours loaded but unrecorded.
  // Modules from the image are always ours; host dependencies only if kmodd loaded them.
  const std::vector<std::string> loaded_before = journal_.modules[d.key].loaded;
  std::vector<std::string> inserted;
  for (const auto& step : d.steps) {
    // `observed` predates the removals: a name removed as in-tree is not loaded any more.
    const bool was_loaded = observed->Find(step.name) != nullptr && !Contains(removed, step.name);
    JournalEntry& entry = journal_.modules[d.key];
    if ((step.source == kernel::LoadStep::Source::kTree || !was_loaded) &&
        !Contains(entry.loaded, step.name)) {
      entry.loaded.push_back(step.name);
      if (auto saved = Save(); !saved.ok()) {
        return saved;
      }
    }
    absl::Status s = step.source == kernel::LoadStep::Source::kTree
                         ? kernel_.InsertFile(step.path, step.params)
                         : kernel_.InsertHost(step.name, step.params);
    if (!s.ok()) {
      std::string report(s.message());
      const std::vector<std::string> stuck = Rollback(inserted, removed, report);
      JournalEntry& failed = journal_.modules[d.key];
      failed.loaded = loaded_before;
      for (const auto& name : stuck) {  // still loaded: keep tracking it
        if (!Contains(failed.loaded, name)) {
          failed.loaded.push_back(name);
        }
      }
      return Fail(d.key, absl::Status(s.code(), report));
    }
    if (!was_loaded) {
      inserted.push_back(step.name);
    }
  }
  journal_.modules[d.key].phase = api::Phase::kLoaded;
  return Save();
}

absl::Status Executor::Unload(const std::string& key) {
  auto it = journal_.modules.find(key);
  if (it == journal_.modules.end()) {
    return absl::OkStatus();
  }
  auto observed = kernel_.Observe();
  if (!observed.ok()) {
    return observed.status();
  }
  ForgetBoot(journal_, observed->boot_id);
  it->second.phase = api::Phase::kUnloading;
  if (auto s = Save(); !s.ok()) {
    return s;
  }
  // Reverse load order: the Module's own modules first, then the dependencies kmodd
  // brought in. Each is removed only if it is still loaded.
  std::vector<std::string>& loaded = it->second.loaded;
  while (!loaded.empty()) {
    const std::string name = loaded.back();
    if (auto s = kernel_.Remove(name); !s.ok()) {
      it->second.message = std::string(s.message());
      if (auto saved = Save(); !saved.ok()) {
        return saved;
      }
      return s;
    }
    loaded.pop_back();
    if (auto s = Save(); !s.ok()) {
      return s;
    }
  }
  if (firmware_ != nullptr && !it->second.firmware.empty()) {
    if (auto s = firmware_->Release(key); !s.ok()) {
      it->second.message = std::string(s.message());
      return s;
    }
  }
  // The in-tree modules removed for this Module stay recorded: the action planner reloads them
  // in the same pass unless another desired Module still removes them.
  journal_.modules.erase(it);
  return Save();
}

absl::Status Executor::ReloadInTree(const std::string& module) {
  auto observed = kernel_.Observe();
  if (!observed.ok()) {
    return observed.status();
  }
  ForgetBoot(journal_, observed->boot_id);
  auto r = std::find_if(journal_.in_tree_removed.begin(), journal_.in_tree_removed.end(),
                        [&](const InTreeRemoval& x) { return x.module == module; });
  if (r == journal_.in_tree_removed.end()) {
    return absl::OkStatus();
  }
  const std::string removed_for = r->removed_for;
  const kernel::LoadedModule* m = observed->Find(module);
  if (m != nullptr && m->OutOfTree()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "in-tree module ", module, " (removed for ", removed_for,
        ") cannot be loaded again while an out-of-tree module of that name is loaded"));
  }
  if (m == nullptr) {
    if (auto s = kernel_.InsertHost(module, ""); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("reloading in-tree module ", module,
                                                 " (removed for ", removed_for,
                                                 "): ", s.message()));
    }
  }
  DropRemoval(journal_, module);
  return Save();
}

absl::Status Executor::Run(const Action& a, const std::vector<DesiredModule>& prepared) {
  switch (a.kind) {
    case Action::Kind::kUnload:
      return Unload(a.key);
    case Action::Kind::kReloadInTree:
      return ReloadInTree(a.key);
    case Action::Kind::kLoad:
      for (const auto& d : prepared) {
        if (d.key == a.key) {
          return Load(d);
        }
      }
      return absl::InternalError(absl::StrCat("no prepared Module ", a.key, " for its load"));
  }
  return absl::InternalError("unknown action");
}

}  // namespace kmodd::reconcile

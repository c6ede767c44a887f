#pragma once

// The agent's persisted record of what it did, in its state directory: for each Module,
// which kernel modules it inserted (in load order), which firmware files it staged, from
// which tree, for which desired configuration; which in-tree modules it removed, and for
// which Module; in which boot. Written atomically after every step, so that a restart (even
// kill -9 in the middle of an operation) converges without double work, and a new boot id
// means that nothing of ours is loaded any more.

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/phase.h"

namespace kmodd::reconcile {

// What the journal records of a Module: Loading, Loaded, Unloading or Failed (never
// Pending, Pulling or Unknown, which describe no work of ours on the kernel). Persisted
// by api::PhaseName.
bool IsJournalPhase(api::Phase p);

struct JournalEntry {
  std::string fingerprint;  // identity of the desired configuration it was loaded for
  std::string source;       // the image reference or dir: tree it came from
  std::string tree;         // the driver tree directory used
  api::Phase phase = api::Phase::kLoading;
  std::vector<std::string> loaded;    // modules kmodd inserted, in load order
  std::vector<std::string> firmware;  // staged firmware files (relative paths)
  std::string message;                // last failure, for people
  bool operator==(const JournalEntry&) const = default;
};

// An in-tree module kmodd removed in this boot, which it owes back to the kernel: it is
// loaded again once no desired Module removes it any more. Kept beside the Modules, not in
// one Module's entry, so that it outlives the entry of the Module it was removed for (an
// unload must not wait for the reload) and so that two Modules removing the same in-tree
// module share one record.
struct InTreeRemoval {
  std::string module;       // the in-tree module removed (canonical name)
  std::string target;       // the inTreeModulesToRemove entry it went for: itself, or the
                            // module it held (reloading it would load the target too)
  std::string removed_for;  // the Module ("namespace/name") whose load removed it
  bool operator==(const InTreeRemoval&) const = default;
};

struct Journal {
  std::string boot_id;
  std::map<std::string, JournalEntry> modules;  // by "namespace/name"
  std::vector<InTreeRemoval> in_tree_removed;   // in removal order
  bool operator==(const Journal&) const = default;
};

// The in-tree modules recorded as removed for Module `key`, in removal order.
std::vector<std::string> InTreeRemovedFor(const Journal& j, const std::string& key);
// Records a removal unless that module is recorded already (the first record, and its
// place in the removal order, stays). False when nothing was added.
bool AddRemoval(Journal& j, InTreeRemoval r);
// Forgets the removal of `module`; false when none was recorded.
bool DropRemoval(Journal& j, const std::string& module);

std::string EncodeJournal(const Journal& j);
[[nodiscard]] absl::StatusOr<Journal> DecodeJournal(const std::string& text, const std::string& source);

// Reads `path`; a missing file is an empty journal, a corrupt one an error naming it.
[[nodiscard]] absl::StatusOr<Journal> LoadJournal(const std::string& path);
[[nodiscard]] absl::Status SaveJournal(const std::string& path, const Journal& j);

// After a reboot nothing kmodd inserted is loaded and nothing it removed is missing:
// forget those lists (firmware stays staged on disk and stays recorded).
void ForgetBoot(Journal& j, const std::string& boot_id);

}  // namespace kmodd::reconcile

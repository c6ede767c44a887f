#pragma once

// Carries out one Action against the kernel, firmware and journal. "Remove the in-tree
// modules, insert the OOT modules" is one transaction: if an insert fails, what this
// action inserted is removed again and the in-tree modules it removed are loaded back,
// and the failure is reported. The journal is written before and after every change.
// Whether an in-tree module goes back after an unload is the action planner's decision
// (Action::Kind::kReloadInTree); an unload itself never waits for it.

#include <string>

#include "absl/status/status.h"
#include "node-agent/kernel/kernel.h"
#include "node-agent/reconcile/journal.h"
#include "node-agent/reconcile/action_planner.h"
#include "node-agent/reconcile/prepare.h"
#include "node-agent/reconcile/stores.h"

namespace kmodd::reconcile {

class Executor {
 public:
  // `firmware` may be null when no Module stages firmware.
  Executor(kernel::Kernel& kernel, FirmwareStore* firmware, std::string journal_path,
           Journal& journal);

  [[nodiscard]] absl::Status Load(const DesiredModule& d);
  [[nodiscard]] absl::Status Unload(const std::string& key);
  // Loads the in-tree `module` kmodd removed from the running kernel's tree and drops its
  // record; only the record when it is back already, nothing when none is kept.
  [[nodiscard]] absl::Status ReloadInTree(const std::string& module);
  // Carries out `a`; a load takes its Module from `prepared`.
  [[nodiscard]] absl::Status Run(const Action& a, const std::vector<DesiredModule>& prepared);

 private:
  absl::Status Save();
  // Removes in-tree `name` (and, first, the modules that hold it) for Module `key`, each
  // recorded as removed for `target` before it goes.
  absl::Status RemoveInTree(const std::string& name, const std::string& target,
                            const std::string& key, const kernel::KernelState& observed,
                            std::vector<std::string>& removed);
  // Undoes a failed swap, dropping the records of the in-tree modules it loaded back;
  // returns the inserted modules it could not remove.
  std::vector<std::string> Rollback(const std::vector<std::string>& inserted,
                                    const std::vector<std::string>& removed, std::string& report);
  absl::Status Fail(const std::string& key, absl::Status s);

  kernel::Kernel& kernel_;
  FirmwareStore* firmware_;
  std::string journal_path_;
  Journal& journal_;
};

}  // namespace kmodd::reconcile

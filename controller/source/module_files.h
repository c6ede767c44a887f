#pragma once

// The Modules of a directory of manifests, file by file. Pure: the caller reads the files
// and says which changed. A file that does not decode or validate is reported and keeps
// the Modules it last defined (bad input loses nothing); a deleted file removes its
// Modules. A Module defined in two files stays with the file that defined it first.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/diagnostic.h"
#include "api/module.h"
#include "api/module_policy.h"

namespace kmodd::source {

// What changed in the set of Modules, to apply to the planner.
struct ModuleChanges {
  std::vector<api::Module> set;      // new or changed
  std::vector<std::string> removed;  // namespace/name
  bool empty() const { return set.empty() && removed.empty(); }
};

class ModuleFiles {
 public:
  // `text` is the file's content, nullopt when the file is gone. An unchanged content is
  // not decoded again.
  ModuleChanges Update(const std::string& file, const std::optional<std::string>& text);

  // The files seen and not deleted, sorted.
  std::vector<std::string> Files() const;
  // The problems of every file whose last content was rejected, in file order.
  std::vector<api::Diagnostic> Errors() const;
  // Warnings (unknown fields, ignored kinds) of every file's last content.
  std::vector<api::Diagnostic> Warnings() const;
  size_t ModuleCount() const { return owner_.size(); }
  // The ModulePolicies of every file's last good content, by the Module they govern
  // (ModulePolicy::ModuleKey). Two policies for one Module: the second file is rejected.
  std::map<std::string, api::ModulePolicy> Policies() const;

 private:
  struct File {
    std::string text;                            // the last content seen, good or bad
    std::map<std::string, api::Module> modules;  // the last good content's, by key
    std::map<std::string, api::ModulePolicy> policies;  // idem, by the Module governed
    std::vector<api::Diagnostic> errors;
    std::vector<api::Diagnostic> warnings;
  };

  ModuleChanges Apply(const std::string& file, const std::string& text);
  // A Module name that was taken may now be free: files rejected for it get another look.
  void RetryRejected(ModuleChanges& changes);
  // The errors of `text`'s Modules (validation, duplicates), or none: then `out` holds them.
  std::vector<api::Diagnostic> Check(const std::string& file, const std::string& text,
                                     std::map<std::string, api::Module>& out,
                                     std::map<std::string, api::ModulePolicy>& policies,
                                     std::vector<api::Diagnostic>& warnings) const;

  std::map<std::string, File> files_;
  std::map<std::string, std::string> owner_;  // Module key -> the file that defines it
};

}  // namespace kmodd::source

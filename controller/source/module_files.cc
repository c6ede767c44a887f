#include "controller/source/module_files.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "api/decode.h"
#include "api/validate.h"

namespace kmodd::source {

std::vector<api::Diagnostic> ModuleFiles::Check(const std::string& file, const std::string& text,
                                                std::map<std::string, api::Module>& out,
                                                std::map<std::string, api::ModulePolicy>& policies,
                                                std::vector<api::Diagnostic>& warnings) const {
  api::Decoded d = api::DecodeDocuments(text, file);
  warnings = std::move(d.warnings);
  for (const auto& n : d.nodes) {
    warnings.push_back(api::Diagnostic{
        file, n.line, absl::StrCat("Node ", n.object.metadata.name), "",
        "Node documents are ignored here: in standalone mode the nodes are the connected "
        "agents"});
  }
  for (const auto& c : d.node_modules_configs) {
    warnings.push_back(api::Diagnostic{
        file, c.line, absl::StrCat("NodeModulesConfig ", c.object.metadata.name), "",
        "NodeModulesConfig documents are ignored here: the controller computes them"});
  }
  std::vector<api::Diagnostic> errors = std::move(d.errors);
  for (auto& lm : d.modules) {
    const std::string key = lm.object.Key();
    const std::string object = absl::StrCat("Module ", key);
    // An update is checked against the Module in force, as the admission webhook would.
    std::vector<api::FieldError> found;
    const auto owner = owner_.find(key);
    if (owner != owner_.end()) {
      const api::Module& old = files_.at(owner->second).modules.at(key);
      found = api::ValidateModuleUpdate(old, lm.object);
    } else {
      found = api::ValidateModule(lm.object);
    }
    for (auto& e : found) {
      errors.push_back(api::Diagnostic{file, lm.LineOf(e.path), object, e.path, e.message});
    }
    if (owner != owner_.end() && owner->second != file) {
      errors.push_back(api::Diagnostic{
          file, lm.line, object, "metadata.name",
          absl::StrCat("already defined in ", owner->second,
                       "; give each Module a unique namespace/name")});
    } else if (out.count(key) != 0) {
      errors.push_back(api::Diagnostic{file, lm.line, object, "metadata.name",
                                       "defined twice in this file; give each Module a unique "
                                       "namespace/name"});
    }
    out.emplace(key, std::move(lm.object));
  }
  for (auto& lp : d.policies) {
    const std::string module = lp.object.ModuleKey();
    const std::string object = absl::StrCat("ModulePolicy ", lp.object.Key());
    bool taken = policies.count(module) != 0;
    std::string where = "this file";
    for (const auto& [name, f] : files_) {
      if (name != file && f.policies.count(module) != 0) {
        taken = true;
        where = name;
      }
    }
    if (taken) {
      errors.push_back(api::Diagnostic{
          file, lp.LineOf("spec.moduleName"), object, "spec.moduleName",
          absl::StrCat("Module ", module, " already has a ModulePolicy in ", where,
                       "; give each Module at most one")});
      continue;
    }
    policies.emplace(module, std::move(lp.object));
  }
  return errors;
}

ModuleChanges ModuleFiles::Update(const std::string& file, const std::optional<std::string>& text) {
  ModuleChanges changes;
  auto it = files_.find(file);
  if (!text) {
    if (it != files_.end()) {
      for (const auto& [key, m] : it->second.modules) {
        owner_.erase(key);
        changes.removed.push_back(key);
      }
      files_.erase(it);
      RetryRejected(changes);
    }
    return changes;
  }
  if (it != files_.end() && it->second.text == *text) {
    return changes;
  }
  return Apply(file, *text);
}

ModuleChanges ModuleFiles::Apply(const std::string& file, const std::string& text) {
  ModuleChanges changes;
  std::map<std::string, api::Module> fresh;
  std::map<std::string, api::ModulePolicy> policies;
  std::vector<api::Diagnostic> warnings;
  std::vector<api::Diagnostic> errors = Check(file, text, fresh, policies, warnings);
  File& f = files_[file];
  f.text = text;
  f.warnings = std::move(warnings);
  if (!errors.empty()) {
    f.errors = std::move(errors);  // the Modules last good stay in force
    return changes;
  }
  f.errors.clear();
  for (const auto& [key, m] : f.modules) {
    if (fresh.count(key) == 0) {
      owner_.erase(key);
      changes.removed.push_back(key);
    }
  }
  for (auto& [key, m] : fresh) {
    const auto old = f.modules.find(key);
    if (old == f.modules.end() || !(old->second == m)) {
      changes.set.push_back(m);
    }
    owner_[key] = file;
  }
  f.modules = std::move(fresh);
  f.policies = std::move(policies);
  if (!changes.removed.empty()) {
    RetryRejected(changes);
  }
  return changes;
}

void ModuleFiles::RetryRejected(ModuleChanges& changes) {
  std::vector<std::string> rejected;
  for (const auto& [name, f] : files_) {
    if (!f.errors.empty()) {
      rejected.push_back(name);
    }
  }
  for (const auto& name : rejected) {
    const std::string text = files_.at(name).text;
    ModuleChanges more = Apply(name, text);
    for (auto& m : more.set) {
      changes.set.push_back(std::move(m));
    }
    for (auto& k : more.removed) {
      changes.removed.push_back(std::move(k));
    }
  }
}

std::vector<std::string> ModuleFiles::Files() const {
  std::vector<std::string> out;
  out.reserve(files_.size());
  for (const auto& [name, f] : files_) {
    out.push_back(name);
  }
  return out;
}

std::vector<api::Diagnostic> ModuleFiles::Errors() const {
  std::vector<api::Diagnostic> out;
  for (const auto& [name, f] : files_) {
    out.insert(out.end(), f.errors.begin(), f.errors.end());
  }
  return out;
}

std::map<std::string, api::ModulePolicy> ModuleFiles::Policies() const {
  std::map<std::string, api::ModulePolicy> out;
  for (const auto& [name, f] : files_) {
    for (const auto& [key, p] : f.policies) {
      out.emplace(key, p);
    }
  }
  return out;
}

std::vector<api::Diagnostic> ModuleFiles::Warnings() const {
  std::vector<api::Diagnostic> out;
  for (const auto& [name, f] : files_) {
    out.insert(out.end(), f.warnings.begin(), f.warnings.end());
  }
  return out;
}

}  // namespace kmodd::source

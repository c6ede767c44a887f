#include "node-agent/kernel/tree.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/file.h"
#include "node-agent/kernel/kernel.h"
#include "node-agent/kernel/kmod_handles.h"

namespace kmodd::kernel {

namespace fs = std::filesystem;

namespace {

bool IsModuleFile(const std::string& file) {
  for (const char* ext : {".ko", ".ko.xz", ".ko.zst", ".ko.gz"}) {
    const std::string_view e(ext);
    if (file.size() > e.size() && file.compare(file.size() - e.size(), e.size(), e) == 0) {
      return true;
    }
  }
  return false;
}

std::string NameFromPath(const std::string& path) {
  std::string base = fs::path(path).filename().string();
  return CanonicalModuleName(base.substr(0, base.find(".ko")));
}

std::vector<std::string> SplitList(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep || c == ' ') {
      if (!cur.empty()) {
        out.push_back(CanonicalModuleName(cur));
      }
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) {
    out.push_back(CanonicalModuleName(cur));
  }
  return out;
}

// "pre: a b post: c" (possibly several softdep entries).
void ParseSoftdep(std::string_view value, TreeModule& m) {
  std::istringstream in{std::string(value)};
  std::string word;
  std::vector<std::string>* into = nullptr;
  while (in >> word) {
    if (word == "pre:") {
      into = &m.softdep_pre;
    } else if (word == "post:") {
      into = &m.softdep_post;
    } else if (into != nullptr) {
      into->push_back(CanonicalModuleName(word));
    }
  }
}

// modules.dep: "kernel/a.ko: kernel/b.ko kernel/c.ko", paths relative to the tree.
std::map<std::string, std::vector<std::string>> ParseModulesDep(const std::string& text) {
  std::map<std::string, std::vector<std::string>> deps;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) {
      continue;
    }
    std::vector<std::string> names;
    std::istringstream rest(line.substr(colon + 1));
    std::string dep;
    while (rest >> dep) {
      names.push_back(NameFromPath(dep));
    }
    deps[NameFromPath(line.substr(0, colon))] = std::move(names);
  }
  return deps;
}

}  // namespace

absl::StatusOr<TreeModule> ReadModuleFile(const std::string& path) {
  static const char* const kNoConfig[] = {nullptr};
  KmodCtx ctx(kmod_new("/nonexistent-kmodd", kNoConfig));
  if (!ctx) {
    return absl::ResourceExhaustedError("kmod_new failed");
  }
  kmod_module* raw = nullptr;
  if (int err = kmod_module_new_from_path(ctx.get(), path.c_str(), &raw); err < 0) {
    return ErrnoStatus(-err, "cannot open module file", path);
  }
  KmodModule mod(raw);
  TreeModule m;
  m.path = path;
  m.name = CanonicalModuleName(kmod_module_get_name(mod.get()));
  kmod_list* info_raw = nullptr;
  if (int err = kmod_module_get_info(mod.get(), &info_raw); err < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": not a readable kernel module (modinfo failed: ", -err, ")"));
  }
  KmodInfoList info(info_raw);
  for (kmod_list* l = info.get(); l != nullptr; l = kmod_list_next(info.get(), l)) {
    const std::string key = kmod_module_info_get_key(l);
    const char* value = kmod_module_info_get_value(l);
    const std::string v = value == nullptr ? "" : value;
    if (key == "depends") {
      m.depends = SplitList(v, ',');
    } else if (key == "softdep") {
      ParseSoftdep(v, m);
    } else if (key == "vermagic") {
      m.vermagic = v;
    } else if (key == "srcversion") {
      m.srcversion = v;
    } else if (key == "intree") {
      m.in_tree = v == "Y";
    }
  }
  kmod_list* versions_raw = nullptr;
  const int nversions = kmod_module_get_versions(mod.get(), &versions_raw);
  KmodVersionList versions(versions_raw);
  m.has_modversions = nversions > 0;
  return m;
}

absl::StatusOr<DriverTree> DriverTree::Open(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat(
        dir, ": no driver tree here; the image must hold <dirName>/lib/modules/<kernel>/"));
  }
  DriverTree t;
  t.dir_ = dir;
  std::map<std::string, std::vector<std::string>> dep_file;
  if (auto text = ReadFile(dir + "/modules.dep"); text.ok()) {
    t.has_modules_dep_ = true;
    dep_file = ParseModulesDep(*text);
  }
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (!it->is_regular_file(ec) || !IsModuleFile(it->path().filename().string())) {
      continue;
    }
    auto m = ReadModuleFile(it->path().string());
    if (!m.ok()) {
      return m.status();
    }
    if (auto d = dep_file.find(m->name); d != dep_file.end()) {
      m->depends = d->second;  // modules.dep is what depmod resolved: it wins
    }
    if (t.modules_.count(m->name) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          dir, ": two files for module ", m->name, ": ", t.modules_[m->name].path, " and ",
          m->path, "; an image must ship one file per module"));
    }
    t.modules_[m->name] = std::move(*m);
  }
  if (ec) {
    return ErrnoStatus(ec.value(), "cannot read driver tree", dir);
  }
  return t;
}

DriverTree DriverTree::FromModules(std::string dir, std::vector<TreeModule> modules) {
  DriverTree t;
  t.dir_ = std::move(dir);
  for (auto& m : modules) {
    t.modules_[m.name] = std::move(m);
  }
  return t;
}

const TreeModule* DriverTree::Find(const std::string& name) const {
  auto it = modules_.find(CanonicalModuleName(name));
  return it == modules_.end() ? nullptr : &it->second;
}

absl::Status CheckVermagic(const TreeModule& m, std::string_view kernel_vermagic) {
  std::string_view mod = m.vermagic;
  std::string_view kern = kernel_vermagic;
  if (m.has_modversions) {
    mod.remove_prefix(std::min(mod.find(' '), mod.size()));
    kern.remove_prefix(std::min(kern.find(' '), kern.size()));
  }
  if (mod == kern) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "vermagic mismatch for ", m.name, " (", m.path, "): module \"", m.vermagic,
      "\", running kernel \"", std::string(kernel_vermagic), "\"",
      m.has_modversions ? " (compared after the release, as the kernel does with modversions)"
                        : "",
      "; the image was built for another kernel"));
}

namespace {

struct Placer {
  const DriverTree& tree;
  const HostLookup& host;
  const std::string& main_module;
  const std::string& params;
  std::vector<LoadStep> steps;
  std::set<std::string> done;
  std::set<std::string> visiting;

  absl::Status Visit(const std::string& raw_name, const std::string& needed_by) {
    const std::string name = CanonicalModuleName(raw_name);
    if (done.count(name) != 0) {
      return absl::OkStatus();
    }
    if (!visiting.insert(name).second) {
      return absl::FailedPreconditionError(
          absl::StrCat("dependency cycle through ", name, " in ", tree.dir()));
    }
    if (const TreeModule* m = tree.Find(name)) {
      for (const auto& pre : m->softdep_pre) {
        if (auto s = Visit(pre, name); !s.ok()) {
          return s;
        }
      }
      for (const auto& dep : m->depends) {
        if (auto s = Visit(dep, name); !s.ok()) {
          return s;
        }
      }
      steps.push_back(LoadStep{name, LoadStep::Source::kTree, m->path,
                               name == CanonicalModuleName(main_module) ? params : ""});
      done.insert(name);
      for (const auto& post : m->softdep_post) {
        if (auto s = Visit(post, name); !s.ok()) {
          return s;
        }
      }
    } else {
      auto path = host(name);
      if (!path.ok()) {
        return path.status();
      }
      if (!path->has_value()) {
        return absl::NotFoundError(absl::StrCat(
            "module ", name, needed_by.empty() ? "" : absl::StrCat(" (needed by ", needed_by, ")"),
            " is neither in the driver tree ", tree.dir(),
            " nor in the running kernel's modules"));
      }
      steps.push_back(LoadStep{name, LoadStep::Source::kHost, **path,
                               name == CanonicalModuleName(main_module) ? params : ""});
      done.insert(name);
    }
    visiting.erase(name);
    return absl::OkStatus();
  }
};

}  // namespace

absl::StatusOr<std::vector<LoadStep>> PlanLoad(const DriverTree& tree,
                                               const std::vector<std::string>& to_load,
                                               const std::string& main_module,
                                               const std::string& params,
                                               const HostLookup& host) {
  Placer p{tree, host, main_module, params, {}, {}, {}};
  for (const auto& name : to_load) {
    // The Module's own modules must come from its image, never from the host.
    if (tree.Find(name) == nullptr) {
      std::string have;
      for (const auto& [n, m] : tree.modules()) {
        absl::StrAppend(&have, have.empty() ? "" : ", ", n);
      }
      return absl::NotFoundError(absl::StrCat("module ", name, " is not in the driver tree ",
                                              tree.dir(), " (it has: ",
                                              have.empty() ? "no modules" : have, ")"));
    }
    if (auto s = p.Visit(name, ""); !s.ok()) {
      return s;
    }
  }
  return std::move(p.steps);
}

}  // namespace kmodd::kernel

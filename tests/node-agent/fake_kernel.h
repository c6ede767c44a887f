#pragma once

// A small state model of the kernel for the reconcile logic's tests: modules, their
// refcounts and holders, in-tree modules on "disk", and injected failures. Tests assert on
// the final state, not on call order.

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "node-agent/kernel/errors.h"
#include "node-agent/kernel/kernel.h"
#include "node-agent/reconcile/stores.h"

namespace kmodd::testing {

class FakeKernel : public kernel::Kernel {
 public:
  std::string release = "6.1.0-test";
  std::string boot_id = "boot-1";
  std::string vermagic = "6.1.0-test SMP mod_unload modversions ";
  std::map<std::string, std::vector<std::string>> deps;  // module -> modules it uses
  std::set<std::string> host;                             // in-tree modules on disk
  std::map<std::string, int> fail_insert;                 // module -> errno
  std::map<std::string, int> extra_refs;                  // users that are not modules
  std::map<std::string, kernel::LoadedModule> loaded;
  std::map<std::string, int> inserts;  // how many times each module was inserted

  absl::StatusOr<kernel::KernelState> Observe() override {
    kernel::KernelState s;
    s.release = release;
    s.boot_id = boot_id;
    for (auto [name, m] : loaded) {
      m.holders.clear();
      for (const auto& [other, od] : deps) {
        if (loaded.count(other) != 0 &&
            std::find(od.begin(), od.end(), name) != od.end()) {
          m.holders.push_back(other);
        }
      }
      m.refcount = static_cast<int>(m.holders.size()) + extra_refs[name];
      s.modules.push_back(m);
    }
    return s;
  }

  absl::Status InsertFile(const std::string& path, const std::string& params) override {
    const std::string name = path.substr(path.rfind('/') + 1, path.rfind(".ko") - path.rfind('/') - 1);
    return Insert(name, params, "O");
  }

  absl::Status InsertHost(const std::string& name, const std::string& params) override {
    if (host.count(name) == 0) {
      return absl::NotFoundError(absl::StrCat("insert ", name, ": not an in-tree module"));
    }
    for (const auto& d : deps[name]) {
      if (auto s = InsertHost(d, ""); !s.ok()) {
        return s;
      }
    }
    return Insert(name, params, "");
  }

  absl::Status Remove(const std::string& name) override {
    auto state = Observe();
    const kernel::LoadedModule* m = state->Find(name);
    if (m == nullptr) {
      return absl::OkStatus();
    }
    if (m->InUse()) {
      return absl::FailedPreconditionError(absl::StrCat("remove ", name, ": in use"));
    }
    loaded.erase(name);
    return absl::OkStatus();
  }

  absl::StatusOr<std::optional<std::string>> HostModulePath(const std::string& name) override {
    if (host.count(name) == 0) {
      return std::optional<std::string>();
    }
    return std::optional<std::string>("/lib/modules/" + release + "/kernel/" + name + ".ko");
  }

  absl::StatusOr<std::string> RunningVermagic() override { return vermagic; }

  bool IsLoaded(const std::string& name) const { return loaded.count(name) != 0; }
  bool IsOurs(const std::string& name) const {
    auto it = loaded.find(name);
    return it != loaded.end() && it->second.OutOfTree();
  }

 private:
  absl::Status Insert(const std::string& name, const std::string& params, const char* taint) {
    if (auto f = fail_insert.find(name); f != fail_insert.end()) {
      return kernel::KernelError(kernel::KernelOp::kInsert, f->second, name);
    }
    if (loaded.count(name) != 0) {
      return absl::OkStatus();
    }
    for (const auto& d : deps[name]) {
      if (loaded.count(d) == 0) {
        return kernel::KernelError(kernel::KernelOp::kInsert, ENOENT, name);
      }
    }
    kernel::LoadedModule m;
    m.name = name;
    m.taint = taint;
    if (!params.empty()) {
      m.parameters["params"] = params;
    }
    loaded[name] = m;
    ++inserts[name];
    return absl::OkStatus();
  }
};

class FakeFirmware : public reconcile::FirmwareStore {
 public:
  std::map<std::string, std::vector<std::string>> staged;  // owner -> files
  absl::StatusOr<std::vector<std::string>> Stage(const std::string& owner,
                                                 const std::string& source_dir) override {
    staged[owner] = {source_dir.substr(source_dir.rfind('/') + 1) + "/fw.bin"};
    return staged[owner];
  }
  absl::Status Release(const std::string& owner) override {
    staged.erase(owner);
    return absl::OkStatus();
  }
  // Staged path -> the host file it shadows (set before the reconciler starts).
  std::map<std::string, std::string> host_files;
  std::vector<firmware::Shadow> Shadowed(const std::vector<std::string>& paths) const override {
    std::vector<firmware::Shadow> out;
    for (const auto& p : paths) {
      if (auto it = host_files.find(p); it != host_files.end()) {
        out.push_back({p, "/var/lib/firmware/" + p, it->second});
      }
    }
    return out;
  }
};

}  // namespace kmodd::testing

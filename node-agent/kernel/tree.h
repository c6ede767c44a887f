#pragma once

// A driver tree laid out as KMM images are (<root><dirName>/lib/modules/<kernel>/), indexed
// for loading: every module file in it with its dependencies (from modules.dep when the
// image ships one, else from each file's own modinfo), softdeps, vermagic and srcversion.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kmodd::kernel {

struct TreeModule {
  std::string name;  // canonical ('_' for '-')
  std::string path;  // absolute
  std::vector<std::string> depends;
  std::vector<std::string> softdep_pre;
  std::vector<std::string> softdep_post;
  std::string vermagic;
  std::string srcversion;
  bool has_modversions = false;  // a __versions section: the kernel then skips the release
  bool in_tree = false;          // modinfo "intree: Y": built with the kernel itself
};

class DriverTree {
 public:
  // Indexes `dir`. A missing directory is NotFound naming it.
  [[nodiscard]] static absl::StatusOr<DriverTree> Open(const std::string& dir);
  // A tree from already-read modules (for tests of load planning).
  static DriverTree FromModules(std::string dir, std::vector<TreeModule> modules);

  const std::string& dir() const { return dir_; }
  bool has_modules_dep() const { return has_modules_dep_; }
  const TreeModule* Find(const std::string& name) const;
  const std::map<std::string, TreeModule>& modules() const { return modules_; }

 private:
  std::string dir_;
  bool has_modules_dep_ = false;
  std::map<std::string, TreeModule> modules_;
};

// Reads one module file's modinfo (also used for host modules' vermagic).
[[nodiscard]] absl::StatusOr<TreeModule> ReadModuleFile(const std::string& path);

// The kernel's own rule (kernel/module/version.c, same_magic): with modversions the
// release part (up to the first space) is skipped and symbol CRCs decide the rest;
// without them the whole string must match. A mismatch names both strings.
[[nodiscard]] absl::Status CheckVermagic(const TreeModule& m, std::string_view kernel_vermagic);

// One module to insert, in order.
struct LoadStep {
  enum class Source { kTree, kHost };
  std::string name;
  Source source = Source::kTree;
  std::string path;    // for kTree
  std::string params;  // only the Module's own moduleName gets its parameters
  bool operator==(const LoadStep&) const = default;
};

// Host lookup: the path of an in-tree module of the running kernel, or nullopt.
using HostLookup = std::function<absl::StatusOr<std::optional<std::string>>(const std::string&)>;

// The insert order for `to_load` (already in load order: for modulesLoadingOrder
// [a, b, c] that is c, b, a): each module after its dependencies and softdep "pre"s and
// before its softdep "post"s, each once. Dependencies not in the tree come from the host.
[[nodiscard]] absl::StatusOr<std::vector<LoadStep>> PlanLoad(const DriverTree& tree,
                                                             const std::vector<std::string>& to_load,
                                                             const std::string& main_module,
                                                             const std::string& params,
                                                             const HostLookup& host);

}  // namespace kmodd::kernel

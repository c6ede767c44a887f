#pragma once

// Preflight (issue 16, item 1): before a fleet moves to kernel K, does every Module have a
// working driver for K? For each Module, in stages, the first failing one says why:
//
//   Mapping  a kernelMapping matches K (KMM's order and substitution, placement/mapping.h)
//   Image    the image exists in its registry (asked directly: manifest, no pull)
//   Content  its layers hold <dirName>/lib/modules/K/ with moduleName and every
//            modulesLoadingOrder module; each .ko's vermagic names K; each dependency is in
//            the tree (or, when K's own module tree is at hand, in the kernel's); the
//            firmwarePath exists; every .ko is signed when the Module signs
//   Done     all of the above held
//
// KMM checks only that the image exists, and waits for ever when it does not; here a
// missing image is a Failure at once (with or without `build`, which kmodd does not run yet:
// the reason says so).
//
// CheckContent is pure (the tables test it); Preflight does the I/O.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/module.h"
#include "common/oci/tar_reader.h"
#include "controller/preflight/modinfo.h"

namespace kmodd::preflight {

// One file of the image's merged filesystem (layers applied in order, whiteouts honoured).
struct ImageFile {
  image::TarType type = image::TarType::kRegular;
  uint64_t size = 0;
  // For a module file (.ko) under the kernel's directory: what its .modinfo says, or why it
  // could not be read.
  std::optional<absl::StatusOr<ModInfo>> modinfo;
};

// Paths relative to the image root, without a leading '/' or "./".
using ImageTree = std::map<std::string, ImageFile>;

// What the Module needs of the image for the kernel.
struct Expectations {
  std::string kernel;
  std::string dir_name = "/opt";     // modprobe.dirName
  std::string module_name;           // modprobe.moduleName
  std::vector<std::string> loading_order;  // modprobe.modulesLoadingOrder
  std::string firmware_path;         // modprobe.firmwarePath ("" when none)
  bool signed_required = false;      // the mapping or container has `sign`
  // The kernel's own module names (from K's modules.dep and modules.builtin), when known:
  // a dependency outside the image must be one of them.
  std::optional<std::set<std::string>> kernel_modules;
  // The kernel's own vermagic (an in-tree module's), when known: a module whose flags after
  // the release differ ("SMP preempt mod_unload modversions") is refused by that kernel.
  std::string kernel_vermagic;
};

struct ContentVerdict {
  bool ok = false;
  std::string reason;              // the first failure, naming the file and what was found
  std::vector<std::string> notes;  // what was found, one line each
};

// Pure.
ContentVerdict CheckContent(const Expectations& want, const ImageTree& tree);

// "opt/lib/modules/<kernel>/": where the Module's modules are in the image.
std::string KernelDir(const Expectations& want);

// Builds an ImageTree from layer tar streams: a TarVisitor per layer, in order. Files under
// `keep_prefix` named *.ko have their bytes read (at most max_module_bytes each) for their
// .modinfo; all other data is skipped as it streams.
class TreeBuilder : public image::TarVisitor {
 public:
  // What one layer did to the tree: its entries and the .modinfo verdicts they got, so that
  // another Module whose image has the same layer (same digest, same kept prefix) replays
  // it without fetching it again.
  struct LayerEvent {
    image::TarEntry entry;
    std::optional<absl::StatusOr<ModInfo>> modinfo;
  };
  using LayerRecord = std::vector<LayerEvent>;

  TreeBuilder(std::string keep_prefix, uint64_t max_module_bytes);
  // Whiteouts of the next layer apply to what the earlier ones hold. With `record`, what
  // the layer does is also written there.
  void StartLayer(LayerRecord* record = nullptr);
  // Applies a recorded layer as if its tar stream came again.
  void Replay(const LayerRecord& record);
  absl::Status OnEntry(const image::TarEntry& entry) override;
  absl::Status OnData(const char* data, size_t n) override;
  absl::Status OnEntryEnd() override;
  ImageTree Take() { return std::move(tree_); }

 private:
  void Remove(const std::string& path, bool children_only);
  std::string keep_prefix_;
  uint64_t max_module_bytes_;
  ImageTree tree_;
  std::set<std::string> this_layer_;  // paths the current layer added (opaque dirs keep them)
  std::string current_;
  bool reading_ = false;
  bool replaying_ = false;
  LayerRecord* record_ = nullptr;
  std::string data_;
};

// The verdict for one Module.
struct Result {
  std::string module;        // namespace/name
  std::string stage;         // Mapping, Image, Content or Done
  bool success = false;
  std::string reason;        // the failure, or what passed
  std::string image;         // the image the mapping gives ("" without one)
  std::string digest;        // its manifest's digest, once resolved
  std::vector<std::string> notes;
  int64_t bytes_fetched = 0;  // blob bytes downloaded for the Content stage
  int64_t image_bytes = 0;    // the image's layers' total size
};

struct Options {
  std::string kernel;
  std::string ca_file;            // extra CAs for registries
  std::string docker_config;      // .dockerconfigjson text: registry credentials ("" none)
  std::optional<std::set<std::string>> kernel_modules;  // see Expectations
  std::string kernel_vermagic;                          // see Expectations
  uint64_t max_module_bytes = uint64_t{256} << 20;
  // Download progress: (module, bytes so far, image bytes). May be empty.
  std::function<void(const std::string&, int64_t, int64_t)> progress;
};

// Checks each Module; one Result per Module, in the order given. Never throws; registry and
// content errors become Failures naming the stage. A layer is fetched once per run: Modules
// whose images share it (same digest) reuse what it held.
std::vector<Result> Preflight(const std::vector<api::Module>& modules, const Options& options);

// The kernel's module names from the text of its modules.dep and modules.builtin.
std::set<std::string> KernelModuleNames(const std::string& modules_dep, const std::string& modules_builtin);

// What preflight knows of kernel K from its module tree (/lib/modules/K of a machine that has
// it installed): its module names and its vermagic (read from the first module modules.dep
// lists). Errors name the file.
struct KernelTree {
  std::set<std::string> modules;
  std::string vermagic;
};
[[nodiscard]] absl::StatusOr<KernelTree> ReadKernelTree(const std::string& dir);

}  // namespace kmodd::preflight

#pragma once

// Kernel mapping resolution, as KMM's kernel mapper does it: mappings in list order, first
// match wins; `literal` is exact equality, `regexp` an unanchored RE2 search; container-level
// fallbacks for containerImage, registryTLS and the in-tree removal list; variables
// substituted in the image.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <re2/re2.h>

#include "absl/status/statusor.h"
#include "api/module.h"
#include "controller/placement/kernel_version.h"

namespace kmodd::placement {

// What one Module needs on one kernel: the `config` of a KMM NodeModulesConfig entry.
struct ResolvedConfig {
  std::string kernel_version;  // as matched: the node's kernel with one trailing '+' trimmed
  std::string container_image;
  std::string image_pull_policy;  // defaulted to IfNotPresent
  api::TlsOptions registry_tls;
  std::vector<std::string> in_tree_modules_to_remove;
  api::ModprobeSpec modprobe;  // dirName defaulted to /opt
  std::string version;         // the Module's spec.moduleLoader.container.version

  // KMM's NodeModulesConfig folds both TLS options into one flag.
  bool InsecurePull() const { return registry_tls.insecure || registry_tls.insecure_skip_tls_verify; }
  bool operator==(const ResolvedConfig&) const = default;
};

// A Module with its regexps compiled once.
class CompiledModule {
 public:
  explicit CompiledModule(api::Module m);

  const api::Module& module() const { return module_; }
  const api::ModuleLoaderContainerSpec* loader() const {
    return module_.spec.module_loader ? &module_.spec.module_loader->container : nullptr;
  }

  // The index of the first mapping matching `kernel` (already '+'-trimmed), or nullopt.
  // A regexp that does not compile is an error (validation rejects such Modules earlier).
  [[nodiscard]] absl::StatusOr<std::optional<size_t>> FindMapping(std::string_view kernel) const;

  // The resolved configuration for `kernel`, nullopt when no mapping matches.
  [[nodiscard]] absl::StatusOr<std::optional<ResolvedConfig>> Resolve(std::string_view kernel) const;

  // What building, signing and checking the Module's driver for `kernel` need: the resolved
  // configuration, the mapping that matched, the merged build and sign (MergedBuild,
  // MergedSign) and KMM's template variables. nullopt when no mapping matches.
  struct KernelPlan {
    ResolvedConfig config;
    const api::KernelMapping* mapping = nullptr;  // into this CompiledModule
    std::optional<api::Build> build;
    std::optional<api::Sign> sign;
    Vars vars;
  };
  [[nodiscard]] absl::StatusOr<std::optional<KernelPlan>> PlanFor(std::string_view kernel) const;

 private:
  api::Module module_;
  std::vector<std::unique_ptr<RE2>> regexps_;  // parallel to kernel_mappings; null for literals
};

// The build and the sign a kernel mapping gets, as KMM merges the container's with the
// mapping's (KMM.md §4): for build, the container's with the mapping's dockerfileConfigMap
// replacing its own, buildArgs merged by name (the mapping's win, new names appended),
// secrets appended, the mapping's selector, kanikoParams and baseImageRegistryTLS ignored;
// for sign, the mapping's unsignedImage, keySecret and certSecret winning when set,
// filesToSign appended, unsignedImageRegistryTLS from the container. Either level alone is
// used as it is; nullopt when neither has one. `mapping` may be null.
std::optional<api::Build> MergedBuild(const api::ModuleLoaderContainerSpec& c, const api::KernelMapping* mapping);
std::optional<api::Sign> MergedSign(const api::ModuleLoaderContainerSpec& c, const api::KernelMapping* mapping);

}  // namespace kmodd::placement

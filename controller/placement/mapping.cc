#include "controller/placement/mapping.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "controller/placement/kernel_version.h"

namespace kmodd::placement {

CompiledModule::CompiledModule(api::Module m) : module_(std::move(m)) {
  if (const auto* c = loader()) {
    regexps_.reserve(c->kernel_mappings.size());
    for (const auto& km : c->kernel_mappings) {
      if (km.regexp.empty()) {
        regexps_.push_back(nullptr);
      } else {
        RE2::Options opts;
        opts.set_log_errors(false);
        regexps_.push_back(std::make_unique<RE2>(km.regexp, opts));
      }
    }
  }
}

absl::StatusOr<std::optional<size_t>> CompiledModule::FindMapping(std::string_view kernel) const {
  const auto* c = loader();
  if (c == nullptr) {
    return std::nullopt;
  }
  for (size_t i = 0; i < c->kernel_mappings.size(); ++i) {
    const auto& km = c->kernel_mappings[i];
    if (!km.literal.empty() && km.literal == kernel) {
      return i;
    }
    const RE2* re = regexps_[i].get();
    if (re == nullptr) {
      continue;
    }
    if (!re->ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.moduleLoader.container.kernelMappings[", i, "].regexp: ",
                       re->error()));
    }
    if (RE2::PartialMatch(kernel, *re)) {
      return i;
    }
  }
  return std::nullopt;
}

absl::StatusOr<std::optional<ResolvedConfig>> CompiledModule::Resolve(
    std::string_view kernel) const {
  auto idx = FindMapping(kernel);
  if (!idx.ok()) {
    return idx.status();
  }
  if (!idx->has_value()) {
    return std::nullopt;
  }
  const auto& c = *loader();
  const auto& km = c.kernel_mappings[**idx];
  ResolvedConfig r;
  r.kernel_version = std::string(kernel);
  r.registry_tls = km.registry_tls ? *km.registry_tls : c.registry_tls;
  r.image_pull_policy = c.image_pull_policy.empty() ? "IfNotPresent" : c.image_pull_policy;
  r.version = c.version;
  r.modprobe = c.modprobe;
  r.modprobe.dir_name = c.modprobe.EffectiveDirName();
  // The list form wins over the deprecated single form at the same level, and the mapping
  // over the container (validation forbids mixing the two forms).
  if (c.in_tree_modules_to_remove) {
    r.in_tree_modules_to_remove = *c.in_tree_modules_to_remove;
  }
  if (km.in_tree_modules_to_remove) {
    r.in_tree_modules_to_remove = *km.in_tree_modules_to_remove;
  }
  const std::string& single =
      km.in_tree_module_to_remove.empty() ? c.in_tree_module_to_remove : km.in_tree_module_to_remove;
  if (!single.empty()) {
    r.in_tree_modules_to_remove = {single};
  }
  const std::string& image = km.container_image.empty() ? c.container_image : km.container_image;
  if (image.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.moduleLoader.container.kernelMappings[", **idx,
        "] has no containerImage and the container has none to fall back to"));
  }
  auto vars = TemplateVars(kernel, module_.metadata.name, module_.metadata.namespace_);
  if (!vars.ok()) {
    return vars.status();
  }
  auto substituted = Substitute(image, *vars);
  if (!substituted.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("containerImage \"", image, "\": ",
                                                   substituted.status().message()));
  }
  r.container_image = std::move(*substituted);
  return r;
}

}  // namespace kmodd::placement

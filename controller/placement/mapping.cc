#include "controller/placement/mapping.h"

#include <algorithm>

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

// The build a kernel mapping gets, as KMM merges the two levels: the container's, with the
// mapping's dockerfileConfigMap replacing its own, buildArgs merged by name (the mapping's
// win, new names appended), secrets appended; the mapping's selector, kanikoParams and
// baseImageRegistryTLS are ignored. nullopt when neither builds.
absl::StatusOr<std::optional<CompiledModule::KernelPlan>> CompiledModule::PlanFor(std::string_view kernel) const {
  const api::ModuleLoaderContainerSpec* c = loader();
  if (c == nullptr) {
    return std::nullopt;
  }
  absl::StatusOr<std::optional<ResolvedConfig>> resolved = Resolve(kernel);
  if (!resolved.ok() || !resolved->has_value()) {
    return resolved.status().ok() ? absl::StatusOr<std::optional<KernelPlan>>(std::nullopt)
                                  : absl::StatusOr<std::optional<KernelPlan>>(resolved.status());
  }
  KernelPlan plan;
  plan.config = **resolved;
  absl::StatusOr<std::optional<size_t>> index = FindMapping(plan.config.kernel_version);
  if (index.ok() && index->has_value()) {
    plan.mapping = &c->kernel_mappings[**index];
  }
  plan.build = MergedBuild(*c, plan.mapping);
  plan.sign = MergedSign(*c, plan.mapping);
  absl::StatusOr<Vars> vars = TemplateVars(plan.config.kernel_version, module_.metadata.name, module_.metadata.namespace_);
  if (!vars.ok()) {
    return vars.status();
  }
  plan.vars = std::move(*vars);
  return plan;
}

std::optional<api::Build> MergedBuild(const api::ModuleLoaderContainerSpec& c, const api::KernelMapping* km) {
  const std::optional<api::Build> none;
  const std::optional<api::Build>& mapping = km != nullptr ? km->build : none;
  if (!c.build) {
    return mapping;
  }
  if (!mapping) {
    return c.build;
  }
  api::Build b = *c.build;
  if (mapping->dockerfile_config_map) {
    b.dockerfile_config_map = mapping->dockerfile_config_map;
  }
  for (const api::BuildArg& a : mapping->build_args) {
    auto it = std::find_if(b.build_args.begin(), b.build_args.end(), [&](const auto& x) { return x.name == a.name; });
    if (it != b.build_args.end()) {
      it->value = a.value;
    } else {
      b.build_args.push_back(a);
    }
  }
  b.secrets.insert(b.secrets.end(), mapping->secrets.begin(), mapping->secrets.end());
  return b;
}

// The sign a kernel mapping gets, as KMM merges the two levels: the mapping's unsignedImage,
// keySecret and certSecret override the container's when set, filesToSign is appended, and
// unsignedImageRegistryTLS comes from the container level only. nullopt when neither signs.
std::optional<api::Sign> MergedSign(const api::ModuleLoaderContainerSpec& c, const api::KernelMapping* km) {
  const std::optional<api::Sign> none;
  const std::optional<api::Sign>& mapping = km != nullptr ? km->sign : none;
  if (!c.sign) {
    return mapping;
  }
  if (!mapping) {
    return c.sign;
  }
  api::Sign s = *c.sign;
  if (!mapping->unsigned_image.empty()) {
    s.unsigned_image = mapping->unsigned_image;
  }
  if (mapping->key_secret) {
    s.key_secret = mapping->key_secret;
  }
  if (mapping->cert_secret) {
    s.cert_secret = mapping->cert_secret;
  }
  s.files_to_sign.insert(s.files_to_sign.end(), mapping->files_to_sign.begin(), mapping->files_to_sign.end());
  return s;
}

}  // namespace kmodd::placement

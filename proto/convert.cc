#include "proto/convert.h"

#include "absl/strings/str_cat.h"
#include "api/validate.h"

namespace kmodd::proto {

namespace {

template <typename Repeated>
std::vector<std::string> Strings(const Repeated& r) {
  return {r.begin(), r.end()};
}

template <typename Repeated>
void Assign(Repeated* r, const std::vector<std::string>& v) {
  r->Clear();
  for (const auto& s : v) {
    r->Add(std::string(s));
  }
}

}  // namespace

void SetReadiness(const std::vector<api::ReadinessCheck>& checks, v1::ModuleSpec& out) {
  out.clear_readiness();
  for (const api::ReadinessCheck& c : checks) {
    v1::ReadinessCheck* r = out.add_readiness();
    r->set_name(c.name);
    r->set_kind(api::CheckKindName(c.kind));
    r->set_path(c.path);
    r->set_has_equals(c.equals.has_value());
    r->set_equals(c.equals.value_or(""));
    r->set_has_contains(c.contains.has_value());
    r->set_contains(c.contains.value_or(""));
    r->set_glob(c.glob);
    r->set_count(c.count);
    r->set_pattern(c.pattern);
    r->set_seconds(c.seconds);
    r->set_timeout_seconds(c.timeout_seconds);
  }
}

v1::ModuleSpec ToProto(const api::NodeModuleSpec& spec) {
  v1::ModuleSpec out;
  out.set_namespace_(spec.namespace_);
  out.set_name(spec.name);
  out.set_version(spec.version);
  out.set_kernel_version(spec.config.kernel_version);
  out.set_container_image(spec.config.container_image);
  out.set_image_pull_policy(spec.config.image_pull_policy);
  out.set_insecure_pull(spec.config.insecure_pull);
  Assign(out.mutable_in_tree_modules_to_remove(), spec.config.in_tree_modules_to_remove);
  if (spec.image_repo_secret) {
    out.set_image_repo_secret(spec.image_repo_secret->name);
  }
  const api::ModprobeSpec& m = spec.config.modprobe;
  v1::Modprobe* p = out.mutable_modprobe();
  p->set_module_name(m.module_name);
  Assign(p->mutable_parameters(), m.parameters);
  p->set_dir_name(m.dir_name);
  p->set_firmware_path(m.firmware_path);
  if (m.args) {
    p->set_has_args(true);
    Assign(p->mutable_load_args(), m.args->load);
    Assign(p->mutable_unload_args(), m.args->unload);
  }
  if (m.raw_args) {
    p->set_has_raw_args(true);
    Assign(p->mutable_raw_load_args(), m.raw_args->load);
    Assign(p->mutable_raw_unload_args(), m.raw_args->unload);
  }
  if (m.modules_loading_order) {
    p->set_has_modules_loading_order(true);
    Assign(p->mutable_modules_loading_order(), *m.modules_loading_order);
  }
  SetReadiness(spec.readiness, out);
  return out;
}

absl::StatusOr<api::NodeModuleSpec> FromProto(const v1::ModuleSpec& in) {
  const std::string who = absl::StrCat("module ", in.namespace_(), "/", in.name());
  auto missing = [&](const char* field) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": ", field, " is empty"));
  };
  if (in.namespace_().empty()) {
    return missing("namespace");
  }
  if (in.name().empty()) {
    return missing("name");
  }
  if (in.kernel_version().empty()) {
    return missing("kernelVersion");
  }
  if (in.container_image().empty()) {
    return missing("containerImage");
  }
  if (in.modprobe().module_name().empty()) {
    return missing("modprobe.moduleName");
  }
  const std::string& policy = in.image_pull_policy();
  if (!policy.empty() && policy != "Always" && policy != "IfNotPresent" && policy != "Never") {
    return absl::InvalidArgumentError(absl::StrCat(
        who, ": imagePullPolicy \"", policy, "\" is not one of Always, IfNotPresent, Never"));
  }
  api::NodeModuleSpec out;
  out.namespace_ = in.namespace_();
  out.name = in.name();
  out.version = in.version();
  out.config.kernel_version = in.kernel_version();
  out.config.container_image = in.container_image();
  out.config.image_pull_policy = in.image_pull_policy();
  out.config.insecure_pull = in.insecure_pull();
  out.config.in_tree_modules_to_remove = Strings(in.in_tree_modules_to_remove());
  if (!in.image_repo_secret().empty()) {
    out.image_repo_secret = api::LocalObjectReference{in.image_repo_secret()};
  }
  const v1::Modprobe& p = in.modprobe();
  api::ModprobeSpec& m = out.config.modprobe;
  m.module_name = p.module_name();
  m.parameters = Strings(p.parameters());
  m.dir_name = p.dir_name();
  m.firmware_path = p.firmware_path();
  if (p.has_args()) {
    m.args = api::ModprobeArgs{Strings(p.load_args()), Strings(p.unload_args())};
  }
  if (p.has_raw_args()) {
    m.raw_args = api::ModprobeArgs{Strings(p.raw_load_args()), Strings(p.raw_unload_args())};
  }
  if (p.has_modules_loading_order()) {
    m.modules_loading_order = Strings(p.modules_loading_order());
  }
  for (const v1::ReadinessCheck& r : in.readiness()) {
    api::ReadinessCheck c;
    c.name = r.name();
    const std::string& kind = r.kind();
    if (kind == "path") {
      c.kind = api::ReadinessCheck::Kind::kPath;
    } else if (kind == "devices") {
      c.kind = api::ReadinessCheck::Kind::kDevices;
    } else if (kind == "kernelLog") {
      c.kind = api::ReadinessCheck::Kind::kKernelLog;
    } else if (kind == "stable") {
      c.kind = api::ReadinessCheck::Kind::kStable;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": readiness check \"", r.name(), "\": kind \"", kind,
                       "\" is not one of path, devices, kernelLog, stable"));
    }
    c.path = r.path();
    if (r.has_equals()) {
      c.equals = r.equals();
    }
    if (r.has_contains()) {
      c.contains = r.contains();
    }
    c.glob = r.glob();
    c.count = r.count();
    c.pattern = r.pattern();
    c.seconds = r.seconds();
    c.timeout_seconds = r.timeout_seconds();
    out.readiness.push_back(std::move(c));
  }
  // The controller's own rules, whoever sent the entry: the controller, or agentctl load.
  const std::vector<api::FieldError> errors = api::ValidateNodeModuleSpec(out);
  if (errors.size() == 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": ", errors[0].path, ": ", errors[0].message));
  }
  if (!errors.empty()) {
    std::string message = absl::StrCat(who, ": ", errors.size(), " invalid fields:");
    for (const auto& e : errors) {
      absl::StrAppend(&message, "\n  ", e.path, ": ", e.message);
    }
    return absl::InvalidArgumentError(message);
  }
  return out;
}

absl::StatusOr<std::vector<api::NodeModuleSpec>> FromProto(const v1::NodeDesired& desired) {
  std::vector<api::NodeModuleSpec> out;
  out.reserve(desired.modules_size());
  for (const auto& m : desired.modules()) {
    auto spec = FromProto(m);
    if (!spec.ok()) {
      return spec.status();
    }
    for (const auto& prev : out) {
      if (prev.Key() == spec->Key()) {
        return absl::InvalidArgumentError(
            absl::StrCat("module ", spec->Key(), " appears twice in desired state"));
      }
    }
    out.push_back(*std::move(spec));
  }
  return out;
}

v1::Phase ToProto(api::Phase p) {
  switch (p) {
    case api::Phase::kUnknown:
      return v1::PHASE_UNSPECIFIED;
    case api::Phase::kPending:
      return v1::PENDING;
    case api::Phase::kPulling:
      return v1::PULLING;
    case api::Phase::kLoading:
      return v1::LOADING;
    case api::Phase::kAvailable:
      return v1::AVAILABLE;
    case api::Phase::kLoaded:
      return v1::LOADED;
    case api::Phase::kUnloading:
      return v1::UNLOADING;
    case api::Phase::kFailed:
      return v1::FAILED;
  }
  return v1::PHASE_UNSPECIFIED;
}

api::Phase FromProto(v1::Phase p) {
  switch (p) {
    case v1::PENDING:
      return api::Phase::kPending;
    case v1::PULLING:
      return api::Phase::kPulling;
    case v1::LOADING:
      return api::Phase::kLoading;
    case v1::AVAILABLE:
      return api::Phase::kAvailable;
    case v1::LOADED:
      return api::Phase::kLoaded;
    case v1::UNLOADING:
      return api::Phase::kUnloading;
    case v1::FAILED:
      return api::Phase::kFailed;
    default:  // PHASE_UNSPECIFIED, and values of a newer peer
      return api::Phase::kUnknown;
  }
}

}  // namespace kmodd::proto

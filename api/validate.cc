#include "api/validate.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <re2/re2.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "api/names.h"
#include "api/readiness.h"

namespace kmodd::api {

namespace {

using Errors = std::vector<FieldError>;

// KMM builds the node-label key "beta.kmm.node.kubernetes.io/version-schedule-pod.<ns>.<name>";
// the part after the '/' is limited to 63 characters, which leaves 41 for namespace and name.
constexpr size_t kMaxNameAndNamespace = 41;
// MODULE_NAME_LEN is 64 - sizeof(unsigned long) on 64-bit kernels, counting the NUL.
constexpr size_t kMaxKernelModuleName = 55;
// KMM's list, and /etc/cdi: CDI specs live in /etc/cdi and /var/run/cdi, and a DRA driver or
// device plugin that writes them needs it (KMM's webhook refuses it).
constexpr const char* kAllowedHostPathRoots[] = {"/dev", "/sys", "/var", "/opt", "/run", "/etc/cdi"};

void Add(Errors& errors, std::string path, std::string message) {
  errors.push_back(FieldError{std::move(path), std::move(message)});
}

// Debian's Abseil has its own string_view, so std::string_view stays out of absl calls.
std::string Index(const std::string& base, size_t i) { return absl::StrCat(base, "[", i, "]"); }

void CheckImage(std::string path, std::string_view image, Errors& errors) {
  if (std::string problem = ImageProblem(image); !problem.empty()) {
    Add(errors, std::move(path), std::move(problem));
  }
}

void CheckNameLength(const ObjectMeta& meta, Errors& errors) {
  const size_t length = meta.name.size() + meta.namespace_.size();
  if (length > kMaxNameAndNamespace) {
    Add(errors, "metadata.name",
        absl::StrCat("name and namespace together are ", length, " characters; at most ",
                     kMaxNameAndNamespace, " are allowed because they form a node-label key ",
                     "(version-schedule-pod.<namespace>.<name>, at most 63 characters)"));
  }
}

void CheckTolerationOperator(const Toleration& t, const std::string& base, Errors& errors) {
  const std::string path = base + ".operator";
  if (!t.op.empty() && t.op != "Equal" && t.op != "Exists") {
    Add(errors, path, absl::StrCat(Quote(t.op), " is not an operator; use Equal or Exists"));
  } else if (t.key.empty() && t.op != "Exists") {
    Add(errors, path,
        "must be Exists when key is empty (an empty key tolerates every taint); set a key or "
        "use operator Exists");
  }
}

void CheckTolerationValue(const Toleration& t, const std::string& base, Errors& errors) {
  const std::string path = base + ".value";
  if (t.op == "Exists" && !t.value.empty()) {
    Add(errors, path, "must be empty when operator is Exists; remove it or use operator Equal");
  } else if ((t.op.empty() || t.op == "Equal") && !t.value.empty() && !IsLabelName(t.value)) {
    Add(errors, path,
        absl::StrCat(Quote(t.value), " is not a label value; use ", kLabelNameRule, ", or empty"));
  }
}

void CheckToleration(const Toleration& t, const std::string& base, Errors& errors) {
  if (!t.key.empty()) {
    if (std::string problem = QualifiedNameProblem(t.key); !problem.empty()) {
      Add(errors, base + ".key",
          absl::StrCat(Quote(t.key), " is not a valid key: ", problem, "; e.g. example.com/gpu"));
    }
  }
  CheckTolerationOperator(t, base, errors);
  CheckTolerationValue(t, base, errors);
  if (!t.effect.empty() && t.effect != "NoSchedule" && t.effect != "PreferNoSchedule" &&
      t.effect != "NoExecute") {
    Add(errors, base + ".effect",
        absl::StrCat(Quote(t.effect),
                     " is not an effect; use NoSchedule, PreferNoSchedule or NoExecute, or leave "
                     "it empty to match all"));
  }
  if (t.toleration_seconds.has_value() && t.effect != "NoExecute") {
    Add(errors, base + ".tolerationSeconds",
        "only applies to effect NoExecute; set effect: NoExecute or remove tolerationSeconds");
  }
}

void CheckPullPolicy(std::string path, std::string_view policy, Errors& errors) {
  if (!policy.empty() && policy != "Always" && policy != "IfNotPresent" && policy != "Never") {
    Add(errors, std::move(path),
        absl::StrCat(Quote(policy), " is not a pull policy; use Always, IfNotPresent or Never"));
  }
}

void CheckPluginPod(const CommonContainerSpec& container,
                    const std::optional<CommonContainerSpec>& init_container,
                    const std::vector<Volume>& volumes, const std::string& base, Errors& errors) {
  CheckPullPolicy(base + ".container.imagePullPolicy", container.image_pull_policy, errors);
  if (init_container.has_value()) {
    CheckPullPolicy(base + ".initContainer.imagePullPolicy", init_container->image_pull_policy,
                    errors);
    // As KMM's webhook: an init container runs to completion, a probe there never applies.
    for (const auto& [field, probe] : {std::pair{"startupProbe", &init_container->startup_probe},
                                       std::pair{"livenessProbe", &init_container->liveness_probe}}) {
      if (probe->Present()) {
        Add(errors, absl::StrCat(base, ".initContainer.", field),
            "probes are not allowed on an init container; put it on the container");
      }
    }
  }
  for (size_t i = 0; i < volumes.size(); ++i) {
    if (!volumes[i].host_path.has_value()) {
      continue;
    }
    const std::string clean = CleanPath(volumes[i].host_path->path);
    if (std::none_of(std::begin(kAllowedHostPathRoots), std::end(kAllowedHostPathRoots),
                     [&](const char* root) { return IsUnder(clean, root); })) {
      Add(errors, Index(base + ".volumes", i) + ".hostPath.path",
          absl::StrCat(Quote(volumes[i].host_path->path),
                       " is not allowed; only /dev, /sys, /var, /opt, /run, /etc/cdi or paths ",
                       "under them are permitted"));
    }
  }
}

void CheckDra(const DraSpec& dra, Errors& errors) {
  CheckPluginPod(dra.container, dra.init_container, dra.volumes, "spec.dra", errors);
  if (dra.driver_name.empty()) {
    Add(errors, "spec.dra.driverName",
        absl::StrCat("missing; set the DRA driver's name, ", kDnsSubdomainRule));
  } else if (!IsDnsSubdomain(dra.driver_name)) {
    Add(errors, "spec.dra.driverName",
        absl::StrCat(Quote(dra.driver_name), " is not valid; use ", kDnsSubdomainRule));
  }
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < dra.device_classes.size(); ++i) {
    const std::string& name = dra.device_classes[i].name;
    const std::string path = Index("spec.dra.deviceClasses", i) + ".name";
    if (name.empty()) {
      Add(errors, path, absl::StrCat("missing; name the device class with ", kDnsSubdomainRule));
    } else if (!IsDnsSubdomain(name)) {
      Add(errors, path, absl::StrCat(Quote(name), " is not valid; use ", kDnsSubdomainRule));
    } else if (auto [it, added] = seen.emplace(name, i); !added) {
      Add(errors, path,
          absl::StrCat(Quote(name), " duplicates deviceClasses[", it->second,
                       "].name; give each device class its own name"));
    }
  }
}

void CheckModuleName(std::string path, std::string_view name, Errors& errors) {
  if (IsValidKernelModuleName(name)) {
    return;
  }
  Add(errors, std::move(path),
      absl::StrCat(Quote(name), " is not a kernel module name; use 1 to ", kMaxKernelModuleName,
                   " letters, digits, '_' or '-'",
                   name.ends_with(".ko") ? ", without the .ko suffix" : ""));
}

// `container` is the mapping's container when `base` is a kernel mapping, null when it is
// the container itself: the two may not mix the deprecated single form with the list.
void CheckInTreeRemovals(const std::string& single,
                         const std::optional<std::vector<std::string>>& list,
                         const ModuleLoaderContainerSpec* container, const std::string& base,
                         Errors& errors) {
  const std::string single_path = base + ".inTreeModuleToRemove";
  const std::string list_path = base + ".inTreeModulesToRemove";
  if (!single.empty()) {
    if (list.has_value()) {
      Add(errors, single_path,
          "cannot be set together with inTreeModulesToRemove; list the module there instead "
          "(inTreeModuleToRemove is deprecated)");
    }
    if (container != nullptr && container->in_tree_modules_to_remove.has_value()) {
      Add(errors, single_path,
          "cannot be combined with spec.moduleLoader.container.inTreeModulesToRemove; use "
          "inTreeModulesToRemove here too");
    }
    CheckModuleName(single_path, single, errors);
  }
  if (!list.has_value()) {
    return;
  }
  if (container != nullptr && !container->in_tree_module_to_remove.empty()) {
    Add(errors, list_path,
        "cannot be combined with spec.moduleLoader.container.inTreeModuleToRemove; use "
        "inTreeModulesToRemove in the container too");
  }
  for (size_t i = 0; i < list->size(); ++i) {
    CheckModuleName(Index(list_path, i), (*list)[i], errors);
  }
}

// As KMM's webhook: every file under dirName + "/", with the CRD's default (/opt) applied
// to an unset dirName before the webhook sees it, and an explicit "" (the image's root,
// decoded as "/") taking any absolute path. Unlike KMM, paths are cleaned first, so that
// "/opt/../etc/x.ko" does not pass for a file under /opt.
void CheckSign(const std::optional<Sign>& sign, const ModprobeSpec& modprobe,
               const std::string& base, Errors& errors) {
  if (!sign.has_value()) {
    return;
  }
  // Cleaned so that a dirName of "/opt/" is reported once, under dirName, and not again here.
  const std::string dir = CleanPath(modprobe.EffectiveDirName());
  const std::string path = base + ".sign.filesToSign";
  if (sign->files_to_sign.empty()) {
    Add(errors, path,
        absl::StrCat("required when sign is set; list the module files to sign, under ", dir));
  }
  for (size_t i = 0; i < sign->files_to_sign.size(); ++i) {
    const std::string& file = sign->files_to_sign[i];
    // Cleaned so that "/opt/../etc/x.ko" does not pass for a file under /opt.
    const std::string clean = CleanPath(file);
    if (clean == dir || !IsUnder(clean, dir)) {
      Add(errors, Index(path, i),
          absl::StrCat(Quote(file), " is not under dirName ", Quote(dir), "; list files under ",
                       dir == "/" ? "/" : dir + "/", " (dirName defaults to ", kDefaultDirName,
                       ")"));
    }
  }
}

void CheckMapping(const ModuleLoaderContainerSpec& c, size_t i, Errors& errors) {
  const KernelMapping& km = c.kernel_mappings[i];
  const std::string base = Index("spec.moduleLoader.container.kernelMappings", i);
  if (km.regexp.empty() == km.literal.empty()) {
    Add(errors, base,
        absl::StrCat(
            km.regexp.empty() ? "sets neither regexp nor literal" : "sets both regexp and literal",
            "; set exactly one (literal matches one kernel version, regexp many)"));
  }
  CheckSign(km.sign, c.modprobe, base, errors);
  if (km.container_image.empty()) {
    if (c.container_image.empty()) {
      Add(errors, base + ".containerImage",
          absl::StrCat("missing; set ", Index("kernelMappings", i),
                       ".containerImage or spec.moduleLoader.container.containerImage"));
    }
  } else {
    CheckImage(base + ".containerImage", km.container_image, errors);
  }
  if (!km.regexp.empty()) {
    RE2::Options options;
    options.set_log_errors(false);  // the error is returned, not logged: this code is pure
    if (RE2 re(km.regexp, options); !re.ok()) {
      Add(errors, base + ".regexp",
          absl::StrCat(Quote(km.regexp), " is not a valid regular expression: ", re.error(),
                       "; use RE2 (Go regexp) syntax, e.g. ^6\\.1\\..*$"));
    }
  }
  CheckInTreeRemovals(km.in_tree_module_to_remove, km.in_tree_modules_to_remove, &c, base, errors);
}

// The agent joins dirName and firmwarePath onto image and host paths; a relative,
// non-normal or escaping path would make it read or write outside what the user named.
void CheckDirectory(std::string path, std::string_view dir, const char* example, Errors& errors) {
  if (std::string problem = ImagePathProblem(dir, example); !problem.empty()) {
    Add(errors, std::move(path), std::move(problem));
  }
}

void CheckRawArgs(const ModprobeSpec& modprobe, const std::string& base, Errors& errors) {
  const bool load = modprobe.raw_args.has_value() && !modprobe.raw_args->load.empty();
  const bool unload = modprobe.raw_args.has_value() && !modprobe.raw_args->unload.empty();
  if (!modprobe.module_name.empty()) {
    for (auto [set, field] : {std::pair{load, "load"}, std::pair{unload, "unload"}}) {
      if (set) {
        Add(errors, absl::StrCat(base, ".rawArgs.", field),
            "must be empty when moduleName is set; use moduleName with args, or rawArgs "
            "without moduleName");
      }
    }
    return;
  }
  if (load != unload) {
    Add(errors, absl::StrCat(base, ".rawArgs.", load ? "unload" : "load"),
        absl::StrCat("required when rawArgs.", load ? "load" : "unload",
                     " is set and moduleName is not; set both rawArgs.load and rawArgs.unload"));
  }
}

void CheckLoadingOrder(const ModprobeSpec& modprobe, const std::string& base, Errors& errors) {
  if (!modprobe.modules_loading_order.has_value()) {
    return;
  }
  const std::vector<std::string>& order = *modprobe.modules_loading_order;
  const std::string path = base + ".modulesLoadingOrder";
  if (order.size() < 2) {
    Add(errors, path, "must list at least 2 modules, moduleName first, or be removed");
  }
  if (modprobe.module_name.empty()) {
    Add(errors, path, "requires moduleName to be set, and to be its first entry");
  }
  // Dashes and underscores name the same module to the kernel.
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < order.size(); ++i) {
    CheckModuleName(Index(path, i), order[i], errors);
    if (i == 0 && !modprobe.module_name.empty() && order[0] != modprobe.module_name) {
      Add(errors, Index(path, 0),
          absl::StrCat(Quote(order[0]), " must be moduleName ", Quote(modprobe.module_name)));
    }
    std::string key = order[i];
    std::replace(key.begin(), key.end(), '-', '_');
    if (auto [it, added] = seen.emplace(key, i); !added) {
      Add(errors, Index(path, i),
          absl::StrCat(Quote(order[i]), " is already listed at modulesLoadingOrder[", it->second,
                       "]; list each module once"));
    }
  }
}

void CheckModprobe(const ModprobeSpec& modprobe, const std::string& base, Errors& errors) {
  if (modprobe.module_name.empty()) {
    const bool any_raw = modprobe.raw_args.has_value() &&
                         !(modprobe.raw_args->load.empty() && modprobe.raw_args->unload.empty());
    if (!any_raw) {
      Add(errors, base + ".moduleName",
          "missing; set moduleName, or both rawArgs.load and rawArgs.unload");
    }
  } else {
    CheckModuleName(base + ".moduleName", modprobe.module_name, errors);
  }
  if (!modprobe.dir_name.empty()) {
    CheckDirectory(base + ".dirName", modprobe.dir_name, kDefaultDirName, errors);
  }
  CheckRawArgs(modprobe, base, errors);
  if (modprobe.firmware_path == "/") {
    Add(errors, base + ".firmwarePath",
        "\"/\" names the whole image; name the directory holding the firmware, e.g. /firmware");
  } else if (!modprobe.firmware_path.empty()) {
    CheckDirectory(base + ".firmwarePath", modprobe.firmware_path, "/firmware", errors);
  }
  CheckLoadingOrder(modprobe, base, errors);
}

// KMM keys its node labels differently with and without a version, so moving between the
// two would orphan labels and pods; only a recreate starts from a clean state.
void CheckVersionChange(const ModuleLoaderContainerSpec& old_c,
                        const ModuleLoaderContainerSpec& new_c, const std::string& base,
                        Errors& errors) {
  if (old_c.version.empty() == new_c.version.empty()) {
    return;
  }
  Add(errors, base + ".version",
      absl::StrCat("cannot change from ", old_c.version.empty() ? "unset" : Quote(old_c.version),
                   " to ", new_c.version.empty() ? "unset" : Quote(new_c.version),
                   "; to set or clear the version, delete the Module and create it again"));
}

// Follows the field order of ModuleLoaderContainerSpec so that errors come out in it.
void CheckLoaderContainer(const ModuleLoaderContainerSpec& c, const ModuleLoaderContainerSpec* old,
                          Errors& errors) {
  const std::string base = "spec.moduleLoader.container";
  CheckSign(c.sign, c.modprobe, base, errors);
  if (old != nullptr) {
    CheckVersionChange(*old, c, base, errors);
  }
  if (!c.container_image.empty()) {
    CheckImage(base + ".containerImage", c.container_image, errors);
  }
  CheckPullPolicy(base + ".imagePullPolicy", c.image_pull_policy, errors);
  for (size_t i = 0; i < c.kernel_mappings.size(); ++i) {
    CheckMapping(c, i, errors);
  }
  CheckModprobe(c.modprobe, base + ".modprobe", errors);
  CheckInTreeRemovals(c.in_tree_module_to_remove, c.in_tree_modules_to_remove, nullptr, base,
                      errors);
}

// `old` is the container before an update, or null on create.
Errors Validate(const Module& m, const ModuleLoaderContainerSpec* old) {
  Errors errors;
  CheckNameLength(m.metadata, errors);
  if (m.spec.device_plugin.has_value()) {
    const DevicePluginSpec& dp = *m.spec.device_plugin;
    CheckPluginPod(dp.container, dp.init_container, dp.volumes, "spec.devicePlugin", errors);
  }
  if (m.spec.dra.has_value()) {
    CheckDra(*m.spec.dra, errors);
  }
  if (m.spec.module_loader.has_value()) {
    CheckLoaderContainer(m.spec.module_loader->container, old, errors);
  }
  for (size_t i = 0; i < m.spec.tolerations.size(); ++i) {
    CheckToleration(m.spec.tolerations[i], Index("spec.tolerations", i), errors);
  }
  return errors;
}

}  // namespace

std::vector<FieldError> KubernetesOnlyFields(const Module& m) {
  std::vector<FieldError> out;
  const char* loader = m.spec.module_loader.has_value()
                           ? "; the module itself is loaded"
                           : "; with no moduleLoader either, this Module does nothing here";
  if (m.spec.device_plugin.has_value()) {
    out.push_back(FieldError{
        "spec.devicePlugin",
        absl::StrCat("not acted on without Kubernetes: the device plugin runs as a DaemonSet, "
                     "which only `kmodd-controller run --kubernetes` makes",
                     loader)});
  }
  if (m.spec.dra.has_value()) {
    out.push_back(FieldError{
        "spec.dra",
        absl::StrCat("not acted on without Kubernetes: the DRA driver runs as a DaemonSet with "
                     "DeviceClasses, which only `kmodd-controller run --kubernetes` makes",
                     loader)});
  }
  return out;
}

bool IsValidKernelModuleName(std::string_view name) {
  return !name.empty() && name.size() <= kMaxKernelModuleName &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
         });
}

std::string ImagePathProblem(std::string_view dir, std::string_view example) {
  const size_t control = static_cast<size_t>(
      std::find_if(dir.begin(), dir.end(),
                   [](char c) { return absl::ascii_iscntrl(static_cast<unsigned char>(c)); }) -
      dir.begin());
  std::string problem;
  if (dir.size() > kMaxImagePath) {
    problem = absl::StrCat("is ", dir.size(), " bytes long; at most ", kMaxImagePath,
                           " are allowed");
  } else if (control < dir.size()) {
    problem = "has a control character";
  } else if (!dir.starts_with('/')) {
    problem = "is not an absolute path";
  } else if (HasDotDot(dir)) {
    problem = "has a '..' component";
  } else if (CleanPath(dir) != dir) {
    problem = absl::StrCat("is not in normal form (write it as ", Quote(CleanPath(dir)), ")");
  }
  if (problem.empty()) {
    return "";
  }
  // A control character or a path too long to read is not echoed back whole.
  const std::string shown =
      control < dir.size() || dir.size() > 80
          ? absl::StrCat("the path beginning ", Quote(dir.substr(0, std::min<size_t>(control, 40))))
          : Quote(dir);
  return absl::StrCat(shown, " ", problem, "; use an absolute path without '.', '..', '//' ",
                      "or a trailing '/', e.g. ", std::string(example));
}

std::vector<FieldError> ValidateNodeModuleSpec(const NodeModuleSpec& m) {
  Errors errors;
  if (const size_t length = m.name.size() + m.namespace_.size(); length > kMaxNameAndNamespace) {
    Add(errors, "name",
        absl::StrCat("name and namespace together are ", length, " characters; at most ",
                     kMaxNameAndNamespace, " are allowed (as for the Module they come from)"));
  }
  // dir:PATH and oci-layout:PATH[:TAG] name a tree or a layout on the node itself, checked
  // where the agent opens them.
  const std::string& image = m.config.container_image;
  if (!image.starts_with("dir:") && !image.starts_with("oci-layout:")) {
    CheckImage("config.containerImage", m.config.container_image, errors);
  }
  CheckPullPolicy("config.imagePullPolicy", m.config.image_pull_policy, errors);
  for (size_t i = 0; i < m.config.in_tree_modules_to_remove.size(); ++i) {
    CheckModuleName(Index("config.inTreeModulesToRemove", i),
                    m.config.in_tree_modules_to_remove[i], errors);
  }
  CheckModprobe(m.config.modprobe, "config.modprobe", errors);
  for (size_t i = 0; i < m.tolerations.size(); ++i) {
    CheckToleration(m.tolerations[i], Index("tolerations", i), errors);
  }
  for (FieldError& e : ValidateReadinessChecks(m.readiness, "readiness")) {
    errors.push_back(std::move(e));
  }
  return errors;
}

std::vector<FieldError> ValidateModule(const Module& m) { return Validate(m, nullptr); }

std::vector<FieldError> ValidateModuleUpdate(const Module& old_module, const Module& new_module) {
  // As KMM: the version rule only applies when both objects load modules.
  const ModuleLoaderContainerSpec* old = nullptr;
  if (old_module.spec.module_loader.has_value() && new_module.spec.module_loader.has_value()) {
    old = &old_module.spec.module_loader->container;
  }
  return Validate(new_module, old);
}

}  // namespace kmodd::api

#include "controller/kube_mode/plugin_daemonset.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "controller/kube_mode/node_labels.h"
#include "controller/placement/selection.h"

namespace kmodd::server {

namespace {

constexpr char kDevicePluginsVolume[] = "kubelet-device-plugins";

}  // namespace

std::string DevicePluginTargetLabel(const std::string& ns, const std::string& name) {
  return absl::StrCat(kLabelPrefix, ns, ".", name, ".device-plugin-target");
}

std::string DevicePluginReadyLabel(const std::string& ns, const std::string& name) {
  return absl::StrCat(kLabelPrefix, ns, ".", name, ".device-plugin-ready");
}

bool DevicePluginTargets(const api::Module& m, const std::map<std::string, std::string>& labels,
                         bool unschedulable, const std::vector<api::Taint>& taints) {
  return m.spec.device_plugin.has_value() &&
         placement::PodSchedulable(m, labels, unschedulable, taints);
}

PluginSelection DevicePluginSelection(const api::Module& m) {
  return ModuleDaemonSetSelection(m, kDevicePluginRole,
                                  DevicePluginTargetLabel(m.metadata.namespace_, m.metadata.name));
}

absl::StatusOr<Value> DevicePluginDaemonSet(const api::Module& m) {
  if (!m.spec.device_plugin.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Module ", m.Key(), " has no spec.devicePlugin"));
  }
  DaemonSetRecipe r = RecipeOf("spec.devicePlugin", kDevicePluginRole, *m.spec.device_plugin);
  r.host_paths = {{kDevicePluginsVolume, kKubeletDevicePluginsPath, "Directory"}};
  r.selection = DevicePluginSelection(m);
  return ModuleDaemonSet(m, r);
}

}  // namespace kmodd::server

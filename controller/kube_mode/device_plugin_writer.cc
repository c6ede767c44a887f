#include "controller/kube_mode/device_plugin_writer.h"

#include "controller/kube_mode/dra_daemonset.h"
#include "controller/kube_mode/plugin_daemonset.h"

namespace kmodd::server {

namespace {

constexpr char kModuleLoaderRole[] = "module-loader";

DaemonSetKind DevicePluginKind() {
  return DaemonSetKind{
      .what = "device plugin",
      .annotation = kDevicePluginSpecAnnotation,
      .owns_role = [](const std::string& role) {
        return role != kModuleLoaderRole && role != kDraRole;
      },
      .wanted = [](const api::Module& m) { return m.spec.device_plugin.has_value(); },
      .build = DevicePluginDaemonSet,
  };
}

}  // namespace

DevicePluginWriter::DevicePluginWriter(kube::KubeClient& client, kube::EventRecorder& events,
                                       Logger& log)
    : refusals_(events, log, "DevicePluginRefused", "device plugin DaemonSet"),
      daemon_sets_(client, refusals_, log, DevicePluginKind()) {}

ReconcileResult DevicePluginWriter::Reconcile(const WriterView& view, const std::string& key) {
  return daemon_sets_.Reconcile(view, key);
}

void DevicePluginWriter::Reset() { refusals_.Reset(); }

std::vector<Condition> DevicePluginWriter::Conditions(const WriterView& view, const std::string& key) {
  const std::optional<api::Module> module = view.ModuleObject(key);
  if (!module || !module->spec.device_plugin.has_value()) {
    return {};
  }
  return {AcceptedCondition(refusals_, key, "DevicePluginAccepted", "the device plugin DaemonSet is written as the Module says")};
}

}  // namespace kmodd::server

#include "controller/kube_mode/dra_daemonset.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "controller/kube_mode/module_daemonset.h"

namespace kmodd::server {

namespace {

Value FieldRefEnv(const char* name, const char* field_path) {
  return Value::Map{
      {"name", name},
      {"valueFrom", Value::Map{{"fieldRef", Value::Map{{"fieldPath", field_path}}}}}};
}

Value Env(const char* name, const std::string& value) {
  return Value::Map{{"name", name}, {"value", value}};
}

}  // namespace

std::string DraTargetLabel(const std::string& ns, const std::string& name) {
  return absl::StrCat("kmm.node.kubernetes.io/", ns, ".", name, ".dra-target");
}

absl::StatusOr<Value> DraDaemonSet(const api::Module& m) {
  if (!m.spec.dra.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat("Module ", m.Key(), " has no spec.dra"));
  }
  DaemonSetRecipe r = RecipeOf("spec.dra", kDraRole, *m.spec.dra);
  r.host_paths = {{"kubelet-plugins", kKubeletPluginsPath, "DirectoryOrCreate"},
                  {"kubelet-plugins-registry", kKubeletPluginsRegistryPath, "Directory"},
                  {"cdi", kCdiPath, "DirectoryOrCreate"}};
  r.env = {FieldRefEnv("NODE_NAME", "spec.nodeName"), FieldRefEnv("POD_UID", "metadata.uid"),
           Env("CDI_ROOT", kCdiPath),
           Env("KUBELET_REGISTRAR_DIRECTORY_PATH", kKubeletPluginsRegistryPath),
           Env("KUBELET_PLUGINS_DIRECTORY_PATH", kKubeletPluginsPath),
           Env("HEALTHCHECK_PORT", absl::StrCat(kDraHealthcheckPort))};
  r.liveness_probe = Value::Map{
      {"grpc", Value::Map{{"port", kDraHealthcheckPort}, {"service", "liveness"}}},
      {"initialDelaySeconds", 30},
      {"periodSeconds", 10},
      {"timeoutSeconds", 5},
      {"failureThreshold", 3}};
  r.host_network = true;
  r.selection =
      ModuleDaemonSetSelection(m, kDraRole, DraTargetLabel(m.metadata.namespace_, m.metadata.name));
  return ModuleDaemonSet(m, r);
}

}  // namespace kmodd::server

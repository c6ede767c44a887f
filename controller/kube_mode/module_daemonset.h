#pragma once

// What KMM's device plugin and DRA DaemonSets have in common (device_plugin_reconciler.go,
// dra_reconciler.go: generatePodContainerSpec and the DaemonSet around it), built once for
// both: plugin_daemonset.h and dra_daemonset.h say what differs. Pure.
//
// The DaemonSet: generateName "<module>-<role>-", labels (the same on its selector and Pods)
// and nodeSelector from a DaemonSetSelection, a controller ownerReference to the Module,
// priorityClassName system-node-critical, containers "<role>-init" (optional) and "<role>",
// privileged unless the container has a securityContext, the hostPaths kmodd mounts
// itself first, then the user's volumes and mounts (a user mount at one of kmodd's paths
// replaces kmodd's: KMM appends both and the API server refuses the DaemonSet, "mountPath:
// must be unique"), imageRepoSecret as the pull secret, the Module's tolerations.

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "api/module.h"
#include "common/value.h"

namespace kmodd::server {

inline constexpr char kModuleNameLabel[] = "kmm.node.kubernetes.io/module.name";
inline constexpr char kRoleLabel[] = "kmm.node.kubernetes.io/role";

// beta.kmm.node.kubernetes.io/version-schedule-pod.<ns>.<name>: which version's plugin or
// DRA driver may run on a node during an ordered upgrade.
std::string SchedulePodVersionLabel(const std::string& ns, const std::string& name);

struct PluginSelection {
  std::map<std::string, std::string> labels;         // the DaemonSet's, its selector's, its Pods'
  std::map<std::string, std::string> node_selector;  // where its Pods run
};

// KMM's labels and nodeSelector for a DaemonSet of `role`: module.name and role; with a
// moduleLoader, the nodes where the module is .ready, plus `gate_label` ("" none) and, when
// versioned, the version-schedule-pod label (on the DaemonSet too); without one,
// spec.selector (an in-tree driver: no .ready label to wait for).
PluginSelection ModuleDaemonSetSelection(const api::Module& m, const std::string& role,
                                         const std::string& gate_label);

// The version a DaemonSet belongs to ("" unversioned): its version-schedule-pod label. One
// DaemonSet exists per version.
std::string DaemonSetVersion(const Value& daemon_set, const api::Module& m);

// A hostPath kmodd mounts into the main container at its own path.
struct PresetHostPath {
  std::string volume;  // the volume's name, unless a user volume has it
  std::string path;
  std::string type;  // Directory, DirectoryOrCreate
};

// The Module's fields of one DaemonSet (spec.devicePlugin or spec.dra) and what kmodd adds.
struct DaemonSetRecipe {
  std::string field;  // "spec.devicePlugin": where an error points
  std::string role;   // the role label; container names and generateName derive from it
  const api::CommonContainerSpec* container = nullptr;
  const api::CommonContainerSpec* init_container = nullptr;  // none when null
  const std::vector<api::Volume>* volumes = nullptr;
  std::string service_account_name;
  std::optional<bool> automount_service_account_token;
  std::vector<PresetHostPath> host_paths;
  // Environment set before the user's (each a Kubernetes EnvVar); a user variable of the
  // same name replaces it.
  std::vector<Value> env;
  // The main container's livenessProbe when the user gives none.
  std::optional<Value> liveness_probe;
  bool host_network = false;
  PluginSelection selection;
};

// A recipe with the fields a DevicePluginSpec and a DraSpec share; `spec` outlives it.
template <typename Spec>
DaemonSetRecipe RecipeOf(std::string field, std::string role, const Spec& spec) {
  DaemonSetRecipe r;
  r.field = std::move(field);
  r.role = std::move(role);
  r.container = &spec.container;
  r.init_container = spec.init_container ? &*spec.init_container : nullptr;
  r.volumes = &spec.volumes;
  r.service_account_name = spec.service_account_name;
  r.automount_service_account_token = spec.automount_service_account_token;
  return r;
}

// apiVersion, kind, metadata (namespace, generateName, labels, ownerReferences) and spec.
// InvalidArgument, naming the field, when a kept-as-is sub-object (resources, probes,
// securityContext, an env valueFrom, a volume source) is not a JSON object.
[[nodiscard]] absl::StatusOr<Value> ModuleDaemonSet(const api::Module& m,
                                                    const DaemonSetRecipe& r);

}  // namespace kmodd::server

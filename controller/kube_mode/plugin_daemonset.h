#pragma once

// The device plugin's DaemonSet for a Module, as KMM's DevicePluginReconciler builds it
// (internal/controllers/device_plugin_reconciler.go, setDevicePluginAsDesired), as a
// Kubernetes object to create or patch. Pure: the writer that lists, creates and deletes
// DaemonSets calls it.
//
// KMM's shape, field for field (module_daemonset.h builds what the DRA driver shares):
// labels module.name and role=device-plugin (plus
// beta.kmm.node.kubernetes.io/version-schedule-pod.<ns>.<name>=<version> for a versioned
// Module), the same labels as the selector; a controller ownerReference to the Module;
// priorityClassName system-node-critical; containers "device-plugin-init" (optional) and
// "device-plugin"; the hostPath /var/lib/kubelet/device-plugins (Directory) mounted at the
// same path, before the user's volumes and mounts; imageRepoSecret as the pull secret; the
// Module's tolerations; nodeSelector <ns>.<name>.ready and .device-plugin-target (and the
// version label), or spec.selector for a Module without a moduleLoader.
//
// Where kmodd differs, on purpose (docs/module-reference.md):
//   - securityContext, startupProbe and livenessProbe come from the Module (KMM's 2026
//     fields); without a securityContext the container is privileged, as in KMM.
//   - A user volumeMount at a path kmodd mounts itself replaces kmodd's mount (KMM appends
//     both and the API server refuses the DaemonSet: "mountPath: must be unique"); kmodd's
//     volume is then left out, and it is renamed if a user volume took its name.
//   - No kmm.node.kubernetes.io/node-labeler finalizer on the Pods: a Pod held by a
//     finalizer no running controller removes would stay Terminating. The
//     .device-plugin-ready label comes from a watch of the Pods instead (plugin_pods.h).

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/module.h"
#include "api/node.h"
#include "common/value.h"
#include "controller/kube_mode/module_daemonset.h"

namespace kmodd::server {

inline constexpr char kDevicePluginRole[] = "device-plugin";
inline constexpr char kKubeletDevicePluginsPath[] = "/var/lib/kubelet/device-plugins";

// kmm.node.kubernetes.io/<ns>.<name>.device-plugin-target: on schedulable selected nodes.
std::string DevicePluginTargetLabel(const std::string& ns, const std::string& name);
// kmm.node.kubernetes.io/<ns>.<name>.device-plugin-ready: a plugin Pod there is Ready.
std::string DevicePluginReadyLabel(const std::string& ns, const std::string& name);

// KMM's handleDevicePluginTargetLabels: the node carries .device-plugin-target for a Module
// with spec.devicePlugin when the Module's selector matches its labels and the node is
// schedulable for it (not cordoned; every NoSchedule and NoExecute taint tolerated), so
// that draining a node (cordon, then evict) takes the plugin off it while the module stays
// loaded (kmodd unloads only for an untolerated NoExecute taint).
bool DevicePluginTargets(const api::Module& m, const std::map<std::string, std::string>& labels,
                         bool unschedulable, const std::vector<api::Taint>& taints);

// KMM's generateDevicePluginLabelsAndSelector.
PluginSelection DevicePluginSelection(const api::Module& m);

// The DaemonSet for `m` (which has spec.devicePlugin): apiVersion, kind, metadata
// (namespace, generateName "<name>-device-plugin-", labels, ownerReferences) and spec.
// InvalidArgument, naming the field, when a kept-as-is sub-object (resources, probes,
// securityContext, a volume source) is not a JSON object.
[[nodiscard]] absl::StatusOr<Value> DevicePluginDaemonSet(const api::Module& m);

}  // namespace kmodd::server

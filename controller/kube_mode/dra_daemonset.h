#pragma once

// The DRA driver's DaemonSet for a Module, as KMM's DRAReconciler builds it
// (internal/controllers/dra_reconciler.go, setDRAAsDesired), as a Kubernetes object to
// create or replace. Pure: dra_writer.h lists, creates and deletes. What it shares with the
// device plugin's (containers, volumes, ownership, pull secret, tolerations) is
// module_daemonset.h's.
//
// KMM's shape, field for field: generateName "<name>-dra-"; labels module.name and role=dra
// (plus the version-schedule-pod label for a versioned Module); hostNetwork; containers
// "dra-init" (optional) and "dra"; the hostPaths /var/lib/kubelet/plugins/
// (DirectoryOrCreate), /var/lib/kubelet/plugins_registry/ (Directory) and /var/run/cdi
// (DirectoryOrCreate), each mounted at its own path; the environment NODE_NAME and POD_UID
// (from the Pod), CDI_ROOT, KUBELET_REGISTRAR_DIRECTORY_PATH,
// KUBELET_PLUGINS_DIRECTORY_PATH and HEALTHCHECK_PORT=51515; a gRPC livenessProbe on that
// port, service "liveness"; nodeSelector <ns>.<name>.ready (and the version label), or
// spec.selector for a Module without a moduleLoader.
//
// Where kmodd differs, on purpose (docs/module-reference.md), besides what the device
// plugin's does (securityContext and probes from the Module, a user mount at a preset path
// replacing kmodd's, no node-labeler finalizer on the Pods):
//   - A user variable named as a preset replaces it (KMM lists both, the later winning in
//     the kubelet, and the API server warns of the duplicate).
//   - A user livenessProbe replaces the default one (KMM's DRA spec has no probe field).
//   - The nodeSelector has kmodd's <ns>.<name>.dra-target too, the device plugin's target
//     label for the DRA driver (KMM has none, its #1328: a drain cannot evict the driver,
//     which holds the device the unload needs): off a cordoned node, and off a node whose
//     driver is about to change, so that the driver leaves first.

#include <string>

#include "absl/status/statusor.h"
#include "api/module.h"
#include "common/value.h"

namespace kmodd::server {

inline constexpr char kDraRole[] = "dra";
// KMM's paths, trailing slashes included.
inline constexpr char kKubeletPluginsPath[] = "/var/lib/kubelet/plugins/";
inline constexpr char kKubeletPluginsRegistryPath[] = "/var/lib/kubelet/plugins_registry/";
inline constexpr char kCdiPath[] = "/var/run/cdi";
inline constexpr int kDraHealthcheckPort = 51515;

// kmm.node.kubernetes.io/<ns>.<name>.dra-target (kmodd's): where the DRA driver may run.
std::string DraTargetLabel(const std::string& ns, const std::string& name);

// The DaemonSet for `m` (which has spec.dra). InvalidArgument, naming the field, when a
// kept-as-is sub-object is not a JSON object.
[[nodiscard]] absl::StatusOr<Value> DraDaemonSet(const api::Module& m);

}  // namespace kmodd::server

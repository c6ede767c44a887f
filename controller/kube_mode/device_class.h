#pragma once

// The DeviceClasses (resource.k8s.io/v1, cluster-scoped) of a Module's spec.dra, as KMM's
// DRAReconciler writes them (handleDeviceClasses): named as deviceClasses[].name, their
// spec.selectors and spec.config the Module's as given. A namespaced Module cannot own a
// cluster-scoped object, so they are the Module's by two labels, module.name and
// module.namespace, which is also how they are listed. Pure.

#include <string>

#include "absl/status/statusor.h"
#include "api/module.h"
#include "common/value.h"

namespace kmodd::server {

inline constexpr char kModuleNamespaceLabel[] = "kmm.node.kubernetes.io/module.namespace";

// "/apis/resource.k8s.io/v1/deviceclasses[/<name>]".
std::string DeviceClassPath(const std::string& name = "");

// module.name=<name>,module.namespace=<ns>: the Module's DeviceClasses.
std::string DeviceClassSelector(const std::string& ns, const std::string& name);

// Whether `device_class` carries the labels of Module <ns>/<name>.
bool IsModulesDeviceClass(const Value& device_class, const std::string& ns,
                          const std::string& name);

// apiVersion, kind, metadata (name, labels) and spec. InvalidArgument, naming the field,
// when selectors or config is not a list.
[[nodiscard]] absl::StatusOr<Value> DeviceClassObject(const api::Module& m, size_t index);

}  // namespace kmodd::server

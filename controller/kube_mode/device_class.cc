#include "controller/kube_mode/device_class.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "controller/kube/client.h"
#include "controller/kube_mode/module_daemonset.h"

namespace kmodd::server {

namespace {

// Sets `key` to the opaque list when it is present.
absl::Status SetList(Value& into, const char* key, const api::Opaque& o,
                     const std::string& field) {
  if (!o.Present()) {
    return absl::OkStatus();
  }
  absl::StatusOr<Value> v = ParseJson(o.json);
  if (!v.ok() || !v->IsList()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": want a list, as Kubernetes defines it",
                     v.ok() ? "" : absl::StrCat(" (", v.status().message(), ")")));
  }
  into.Set(key, *std::move(v));
  return absl::OkStatus();
}

}  // namespace

std::string DeviceClassPath(const std::string& name) {
  return kube::ResourcePath("resource.k8s.io/v1", "deviceclasses", "", name);
}

std::string DeviceClassSelector(const std::string& ns, const std::string& name) {
  return absl::StrCat(kModuleNameLabel, "=", name, ",", kModuleNamespaceLabel, "=", ns);
}

bool IsModulesDeviceClass(const Value& device_class, const std::string& ns,
                          const std::string& name) {
  return StringAt(device_class, {"metadata", "labels", kModuleNameLabel}) == name &&
         StringAt(device_class, {"metadata", "labels", kModuleNamespaceLabel}) == ns;
}

absl::StatusOr<Value> DeviceClassObject(const api::Module& m, size_t index) {
  if (!m.spec.dra.has_value() || index >= m.spec.dra->device_classes.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Module ", m.Key(), " has no spec.dra.deviceClasses[", index, "]"));
  }
  const api::DeviceClassSpec& c = m.spec.dra->device_classes[index];
  const std::string field = absl::StrCat("spec.dra.deviceClasses[", index, "]");
  Value spec = Value::EmptyMap();
  if (absl::Status s = SetList(spec, "selectors", c.selectors, field + ".selectors"); !s.ok()) {
    return s;
  }
  if (absl::Status s = SetList(spec, "config", c.config, field + ".config"); !s.ok()) {
    return s;
  }
  return Value(Value::Map{
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "DeviceClass"},
      {"metadata", Value::Map{{"name", c.name},
                              {"labels", Value::Map{{kModuleNameLabel, m.metadata.name},
                                                    {kModuleNamespaceLabel,
                                                     m.metadata.namespace_}}}}},
      {"spec", std::move(spec)}});
}

}  // namespace kmodd::server

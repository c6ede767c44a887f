#include "controller/kube_mode/device_plugin_writer.h"

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json.h"
#include "controller/kube_mode/kube_source.h"
#include "controller/kube_mode/plugin_daemonset.h"

namespace kmodd::server {

namespace {

constexpr char kModuleLoaderRole[] = "module-loader";

std::string DaemonSetPath(const std::string& ns, const std::string& name) {
  return kube::ResourcePath("apps/v1", "daemonsets", ns, name);
}

// `base`'s labels with `over`'s set on top (KMM's overrideLabels).
Value MergedLabels(const Value* base, const Value* over) {
  Value out = base != nullptr && base->IsMap() ? *base : Value::EmptyMap();
  if (over != nullptr && over->IsMap()) {
    for (const auto& [k, v] : over->AsMap()) {
      out = With(out, k, v);
    }
  }
  return out;
}

}  // namespace

std::string DaemonSetHash(const Value& daemon_set) {
  uint64_t h = 14695981039346656037ULL;  // FNV-1a, 64 bits
  for (const char c : ToJsonLine(daemon_set)) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return absl::StrFormat("%016x", h);
}

DevicePluginWriter::DevicePluginWriter(kube::KubeClient& client, kube::EventRecorder& events,
                                       Logger& log)
    : client_(client), events_(events), log_(log) {}

void DevicePluginWriter::Reset() {
  std::lock_guard lock(mu_);
  refused_.clear();
  refusal_.clear();
}

std::vector<Condition> DevicePluginWriter::Conditions(const WriterView& view,
                                                      const std::string& key) {
  const std::optional<api::Module> module = view.ModuleObject(key);
  if (!module || !module->spec.device_plugin.has_value()) {
    return {};
  }
  std::lock_guard lock(mu_);
  if (auto it = refusal_.find(key); it != refusal_.end()) {
    return {Condition{"DevicePluginAccepted", "False", "Refused",
                      absl::StrCat("the API server refused the device plugin DaemonSet: ",
                                   it->second)}};
  }
  return {Condition{"DevicePluginAccepted", "True", "Written",
                    "the device plugin DaemonSet is written as the Module says"}};
}

absl::Status DevicePluginWriter::DeleteAll(const std::vector<Value>& daemon_sets) {
  for (const Value& ds : daemon_sets) {
    const std::string ns = StringAt(ds, {"metadata", "namespace"});
    const std::string name = StringAt(ds, {"metadata", "name"});
    const std::string full = absl::StrCat(ns, "/", name);
    absl::Status s = client_.Delete(DaemonSetPath(ns, name));
    if (!s.ok() && !absl::IsNotFound(s)) {
      log_.Warn("cannot delete a device plugin DaemonSet",
                {{"daemonSet", full}, {"error", s.ToString()}});
      return s;
    }
    log_.Info("device plugin DaemonSet deleted", {{"daemonSet", full}});
  }
  return absl::OkStatus();
}

void DevicePluginWriter::Refused(const source::ModuleMeta& meta, const std::string& message) {
  log_.Warn("the API server refused the device plugin DaemonSet",
            {{"module", meta.Key()}, {"error", message}});
  {
    std::lock_guard lock(mu_);
    refusal_[meta.Key()] = message;
    std::string& last = refused_[meta.Key()];
    if (last == message) {
      return;
    }
    last = message;
  }
  kube::ObjectReference ref{"kmm.sigs.x-k8s.io/v1beta1", "Module", meta.ns, meta.name, meta.uid};
  if (absl::Status s = events_.Record(ref, kube::kEventWarning, "DevicePluginRefused",
                                      absl::StrCat("the device plugin DaemonSet was refused: ",
                                                   message));
      !s.ok()) {
    log_.Warn("cannot record a Module event", {{"module", meta.Key()}, {"error", s.ToString()}});
    std::lock_guard lock(mu_);
    refused_.erase(meta.Key());  // evented again at the next refusal
  }
}

ReconcileResult DevicePluginWriter::Reconcile(const WriterView& view, const std::string& key) {
  const size_t slash = key.find('/');
  if (slash == std::string::npos) {
    return ReconcileResult::Ok();
  }
  const std::string ns = key.substr(0, slash);
  const std::string name = key.substr(slash + 1);
  const std::optional<source::ModuleMeta> meta = view.Module(key);
  const std::optional<api::Module> module = view.ModuleObject(key);

  kube::ListOptions options;
  options.label_selector = absl::StrCat(kModuleNameLabel, "=", name);
  absl::StatusOr<kube::ObjectList> listed =
      client_.List(kube::ResourcePath("apps/v1", "daemonsets", ns), options);
  const bool wanted = meta && !meta->deleting && module && module->spec.device_plugin.has_value();
  if (!listed.ok()) {
    if (absl::IsPermissionDenied(listed.status()) && !wanted) {
      // No DaemonSet access in this namespace (deploy/ grants it where Modules live): then
      // kmodd made none here, and none is wanted.
      return ReconcileResult::Ok();
    }
    log_.Warn("cannot list device plugin DaemonSets",
              {{"module", key}, {"error", listed.status().ToString()}});
    if (wanted && absl::IsPermissionDenied(listed.status())) {
      Refused(*meta, std::string(listed.status().message()));
    }
    return ReconcileResult::Error(listed.status());
  }
  std::vector<Value> ours;
  for (Value& ds : listed->items) {
    const std::string role = StringAt(ds, {"metadata", "labels", kRoleLabel});
    if (role != kModuleLoaderRole && role != kDraRole) {
      ours.push_back(std::move(ds));
    }
  }

  if (!wanted) {
    {
      std::lock_guard lock(mu_);
      refused_.erase(key);
      refusal_.erase(key);
    }
    absl::Status s = DeleteAll(ours);
    return s.ok() ? ReconcileResult::Ok() : ReconcileResult::Error(s);
  }

  absl::StatusOr<Value> built = DevicePluginDaemonSet(*module);
  if (!built.ok()) {
    Refused(*meta, std::string(built.status().message()));
    return ReconcileResult::Error(built.status());
  }
  const std::string hash = DaemonSetHash(*built);
  Value desired = *std::move(built);
  {
    Value metadata = *Lookup(desired, {"metadata"});
    metadata = With(metadata, "annotations", Value::Map{{kDevicePluginSpecAnnotation, hash}});
    desired = With(desired, "metadata", std::move(metadata));
  }

  const std::string version = DaemonSetVersion(desired, *module);
  const Value* current = nullptr;
  for (const Value& ds : ours) {
    if (DaemonSetVersion(ds, *module) == version) {
      current = &ds;
      break;
    }
  }
  absl::Status written;
  if (current == nullptr) {
    absl::StatusOr<Value> made =
        client_.Create(kube::ResourcePath("apps/v1", "daemonsets", ns), desired);
    written = made.status();
    if (made.ok()) {
      log_.Info("device plugin DaemonSet created",
                {{"module", key}, {"daemonSet", StringAt(*made, {"metadata", "name"})},
                 {"version", version}});
    }
  } else if (StringAt(*current, {"metadata", "annotations", kDevicePluginSpecAnnotation}) != hash) {
    // The existing object (its name, resourceVersion, uid), the built labels on top of its
    // own, the built spec, owner and annotation.
    Value metadata = *Lookup(*current, {"metadata"});
    metadata = With(metadata, "labels",
                    MergedLabels(Lookup(*current, {"metadata", "labels"}),
                                 Lookup(desired, {"metadata", "labels"})));
    metadata = With(metadata, "annotations",
                    MergedLabels(Lookup(*current, {"metadata", "annotations"}),
                                 Lookup(desired, {"metadata", "annotations"})));
    metadata = With(metadata, "ownerReferences", *Lookup(desired, {"metadata", "ownerReferences"}));
    Value object = With(*current, "metadata", std::move(metadata));
    object = With(object, "spec", *Lookup(desired, {"spec"}));
    const std::string ds_name = StringAt(*current, {"metadata", "name"});
    absl::StatusOr<Value> updated = client_.Update(DaemonSetPath(ns, ds_name), object);
    written = updated.status();
    if (updated.ok()) {
      log_.Info("device plugin DaemonSet updated",
                {{"module", key}, {"daemonSet", ds_name}, {"version", version}});
    }
  }
  if (absl::IsInvalidArgument(written)) {
    Refused(*meta, std::string(written.message()));
    return ReconcileResult::Error(written);
  }
  if (!written.ok()) {
    log_.Warn("cannot write the device plugin DaemonSet",
              {{"module", key}, {"error", written.ToString()}});
    return ReconcileResult::Error(written);
  }
  {
    std::lock_guard lock(mu_);
    refused_.erase(key);
    refusal_.erase(key);
  }

  // KMM's garbage collection: another version's DaemonSet once it runs nowhere.
  if (module->spec.module_loader.has_value()) {
    std::vector<Value> unused;
    for (const Value& ds : ours) {
      if (DaemonSetVersion(ds, *module) != version &&
          IntAt(ds, {"status", "desiredNumberScheduled"}) == 0) {
        unused.push_back(ds);
      }
    }
    if (absl::Status s = DeleteAll(unused); !s.ok()) {
      return ReconcileResult::Error(s);
    }
  }
  return ReconcileResult::Ok();
}

}  // namespace kmodd::server

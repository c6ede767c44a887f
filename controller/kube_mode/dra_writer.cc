#include "controller/kube_mode/dra_writer.h"

#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "controller/kube_mode/device_class.h"
#include "controller/kube_mode/dra_daemonset.h"
#include "controller/kube_mode/module_daemonset.h"

namespace kmodd::server {

namespace {

constexpr char kListSubject[] = "deviceclasses";

std::string Subject(const std::string& device_class) {
  return absl::StrCat("deviceclass/", device_class);
}

DaemonSetKind DraKind() {
  return DaemonSetKind{
      .what = "DRA driver",
      .annotation = kDraSpecAnnotation,
      .owns_role = [](const std::string& role) { return role == kDraRole; },
      .wanted = [](const api::Module& m) { return m.spec.dra.has_value(); },
      .build = DraDaemonSet,
  };
}

absl::Status First(const absl::Status& a, const absl::Status& b) { return !a.ok() ? a : b; }

}  // namespace

DraWriter::DraWriter(kube::KubeClient& client, kube::EventRecorder& events, Logger& log)
    : client_(client),
      log_(log),
      refusals_(events, log, "DraRefused", "DRA driver"),
      daemon_sets_(client, refusals_, log, DraKind()) {}

void DraWriter::Reset() { refusals_.Reset(); }

ReconcileResult DraWriter::Reconcile(const WriterView& view, const std::string& key) {
  const ReconcileResult daemon_sets = daemon_sets_.Reconcile(view, key);  // first: the driver
  return Merge(daemon_sets, DeviceClasses(view, key));
}

absl::Status DraWriter::DeleteDeviceClass(const std::string& key, const Value& device_class) {
  const std::string name = StringAt(device_class, {"metadata", "name"});
  absl::Status s = client_.Delete(DeviceClassPath(name));
  if (!s.ok() && !absl::IsNotFound(s)) {
    log_.Warn("cannot delete a DeviceClass",
              {{"module", key}, {"deviceClass", name}, {"error", s.ToString()}});
    return s;
  }
  log_.Info("DeviceClass deleted", {{"module", key}, {"deviceClass", name}});
  return absl::OkStatus();
}

absl::Status DraWriter::WriteDeviceClass(const source::ModuleMeta& meta, const api::Module& m,
                                         size_t index, const Value* current) {
  const std::string& name = m.spec.dra->device_classes[index].name;
  const std::string key = meta.Key();
  absl::StatusOr<Value> built = DeviceClassObject(m, index);
  absl::Status written = built.status();
  if (built.ok()) {
    const Value desired = WithHash(*built, kDraSpecAnnotation);
    if (current == nullptr) {
      absl::StatusOr<Value> made = client_.Create(DeviceClassPath(), desired);
      written = made.status();
      if (made.ok()) {
        log_.Info("DeviceClass created", {{"module", key}, {"deviceClass", name}});
      }
    } else if (StringAt(*current, {"metadata", "annotations", kDraSpecAnnotation}) !=
               StringAt(desired, {"metadata", "annotations", kDraSpecAnnotation})) {
      absl::StatusOr<Value> updated =
          client_.Update(DeviceClassPath(name), Replacing(*current, desired));
      written = updated.status();
      if (updated.ok()) {
        log_.Info("DeviceClass updated", {{"module", key}, {"deviceClass", name}});
      }
    }
  }
  if (absl::IsAlreadyExists(written)) {
    // Not in the Module's list: another's. (One made since the list would be the Module's
    // own; the retry then finds it.) Read by a list: the controller has no get on them.
    const Value* taken = nullptr;
    kube::ListOptions by_name;
    by_name.field_selector = absl::StrCat("metadata.name=", name);
    absl::StatusOr<kube::ObjectList> found = client_.List(DeviceClassPath(), by_name);
    if (!found.ok()) {
      log_.Warn("cannot read a DeviceClass",
                {{"module", key}, {"deviceClass", name}, {"error", found.status().ToString()}});
      return found.status();
    }
    for (const Value& dc : found->items) {
      taken = StringAt(dc, {"metadata", "name"}) == name ? &dc : taken;
    }
    if (taken != nullptr && !IsModulesDeviceClass(*taken, meta.ns, meta.name)) {
      const std::string owner = StringAt(*taken, {"metadata", "labels", kModuleNameLabel});
      refusals_.Refused(
          meta, Subject(name),
          absl::StrCat("the DeviceClass ", name, " exists and is not this Module's (",
                       owner.empty() ? "no Module's labels"
                                     : absl::StrCat("Module ",
                                                    StringAt(*taken, {"metadata", "labels",
                                                                      kModuleNamespaceLabel}),
                                                    "/", owner),
                       "): kmodd does not overwrite it; rename the class or delete that one"));
      return absl::FailedPreconditionError(absl::StrCat("DeviceClass ", name, " is taken"));
    }
    return absl::AbortedError(absl::StrCat("DeviceClass ", name, " appeared since the list"));
  }
  if (absl::IsInvalidArgument(written)) {
    refusals_.Refused(meta, Subject(name),
                      absl::StrCat("the DeviceClass ", name, " was refused: ", written.message()));
  } else if (!written.ok()) {
    log_.Warn("cannot write a DeviceClass",
              {{"module", key}, {"deviceClass", name}, {"error", written.ToString()}});
  } else {
    refusals_.Cleared(key, Subject(name));
  }
  return written;
}

ReconcileResult DraWriter::DeviceClasses(const WriterView& view, const std::string& key) {
  const std::optional<ModuleKey> k = SplitModuleKey(key);
  if (!k) {
    return ReconcileResult::Ok();
  }
  const std::optional<source::ModuleMeta> meta = view.Module(key);
  const std::optional<api::Module> module = view.ModuleObject(key);
  const bool wanted = meta && !meta->deleting && module && module->spec.dra.has_value();
  if (meta && meta->deleting && meta->HasUnloadFinalizer() && view.ReportedByConnected(key)) {
    // Deleting: the driver's Pods go first, then the nodes unload the module, then the
    // classes (KMM's order), in the pass that releases the finalizer (no node reports the
    // module any more): after it, the Module is gone and nothing calls this again.
    return ReconcileResult::Ok();
  }

  kube::ListOptions options;
  options.label_selector = DeviceClassSelector(k->ns, k->name);
  absl::StatusOr<kube::ObjectList> listed = client_.List(DeviceClassPath(), options);
  if (!listed.ok()) {
    // Forbidden: deploy/ grants DeviceClasses; NotFound: resource.k8s.io/v1 not served.
    const bool absent =
        absl::IsPermissionDenied(listed.status()) || absl::IsNotFound(listed.status());
    if (absent && !wanted) {
      return ReconcileResult::Ok();  // then kmodd made none
    }
    log_.Warn("cannot list DeviceClasses", {{"module", key}, {"error", listed.status().ToString()}});
    if (absent) {
      refusals_.Refused(*meta, kListSubject,
                        absl::StrCat("the DeviceClasses cannot be listed (resource.k8s.io/v1, "
                                     "Kubernetes 1.34 or later): ",
                                     listed.status().message()));
    }
    return ReconcileResult::Error(listed.status());
  }
  std::map<std::string, const Value*> ours;
  for (const Value& dc : listed->items) {
    if (IsModulesDeviceClass(dc, k->ns, k->name)) {
      ours[StringAt(dc, {"metadata", "name"})] = &dc;
    }
  }

  absl::Status first;
  std::set<std::string> listed_names;
  if (wanted) {
    refusals_.Cleared(key, kListSubject);
    for (size_t i = 0; i < module->spec.dra->device_classes.size(); ++i) {
      const std::string& name = module->spec.dra->device_classes[i].name;
      listed_names.insert(name);
      auto it = ours.find(name);
      first = First(first, WriteDeviceClass(*meta, *module, i,
                                            it == ours.end() ? nullptr : it->second));
    }
  } else {
    refusals_.Forget(key);
  }
  for (const auto& [name, dc] : ours) {
    if (listed_names.count(name) == 0) {
      first = First(first, DeleteDeviceClass(key, *dc));
    }
  }
  return first.ok() ? ReconcileResult::Ok() : ReconcileResult::Error(first);
}

std::vector<Condition> DraWriter::Conditions(const WriterView& view, const std::string& key) {
  const std::optional<api::Module> module = view.ModuleObject(key);
  if (!module || !module->spec.dra.has_value()) {
    return {};
  }
  return {AcceptedCondition(refusals_, key, "DraAccepted", "the DRA driver DaemonSet and DeviceClasses are written as the Module says")};
}

}  // namespace kmodd::server

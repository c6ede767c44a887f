#include "controller/kube_mode/module_daemonset_writer.h"

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json.h"
#include "controller/kube_mode/module_daemonset.h"

namespace kmodd::server {

namespace {

constexpr char kSubject[] = "daemonset";

std::string DaemonSetPath(const std::string& ns, const std::string& name = "") {
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

Value Replacing(const Value& current, const Value& desired) {
  Value metadata = *Lookup(current, {"metadata"});
  metadata = With(metadata, "labels",
                  MergedLabels(Lookup(current, {"metadata", "labels"}),
                               Lookup(desired, {"metadata", "labels"})));
  metadata = With(metadata, "annotations",
                  MergedLabels(Lookup(current, {"metadata", "annotations"}),
                               Lookup(desired, {"metadata", "annotations"})));
  if (const Value* owners = Lookup(desired, {"metadata", "ownerReferences"})) {
    metadata = With(metadata, "ownerReferences", *owners);
  }
  Value object = With(current, "metadata", std::move(metadata));
  return With(object, "spec", *Lookup(desired, {"spec"}));
}

std::string DaemonSetHash(const Value& object) {
  uint64_t h = 14695981039346656037ULL;  // FNV-1a, 64 bits
  for (const char c : ToJsonLine(object)) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return absl::StrFormat("%016x", h);
}

Value WithHash(const Value& built, const std::string& annotation) {
  return With(built, "metadata",
              With(*Lookup(built, {"metadata"}), "annotations",
                   Value::Map{{annotation, DaemonSetHash(built)}}));
}

std::optional<ModuleKey> SplitModuleKey(const std::string& key) {
  const size_t slash = key.find('/');
  if (slash == std::string::npos) {
    return std::nullopt;
  }
  return ModuleKey{key.substr(0, slash), key.substr(slash + 1)};
}

ModuleDaemonSetWriter::ModuleDaemonSetWriter(kube::KubeClient& client, RefusalEvents& refusals,
                                             Logger& log, DaemonSetKind kind)
    : client_(client), refusals_(refusals), log_(log), kind_(std::move(kind)) {}

absl::Status ModuleDaemonSetWriter::DeleteAll(const std::vector<Value>& daemon_sets) {
  for (const Value& ds : daemon_sets) {
    const std::string ns = StringAt(ds, {"metadata", "namespace"});
    const std::string name = StringAt(ds, {"metadata", "name"});
    const std::string full = absl::StrCat(ns, "/", name);
    absl::Status s = client_.Delete(DaemonSetPath(ns, name));
    if (!s.ok() && !absl::IsNotFound(s)) {
      log_.Warn(absl::StrCat("cannot delete a ", kind_.what, " DaemonSet"),
                {{"daemonSet", full}, {"error", s.ToString()}});
      return s;
    }
    log_.Info(absl::StrCat(kind_.what, " DaemonSet deleted"), {{"daemonSet", full}});
  }
  return absl::OkStatus();
}

void ModuleDaemonSetWriter::Refused(const source::ModuleMeta& meta, const absl::Status& s) {
  refusals_.Refused(meta, kSubject,
                    absl::StrCat("the ", kind_.what, " DaemonSet was refused: ", s.message()));
}

absl::Status ModuleDaemonSetWriter::Write(const std::string& key, const Value* current,
                                          const Value& desired, const std::string& version) {
  const std::string ns = StringAt(desired, {"metadata", "namespace"});
  if (current == nullptr) {
    absl::StatusOr<Value> made = client_.Create(DaemonSetPath(ns), desired);
    if (made.ok()) {
      log_.Info(absl::StrCat(kind_.what, " DaemonSet created"),
                {{"module", key}, {"daemonSet", StringAt(*made, {"metadata", "name"})},
                 {"version", version}});
    }
    return made.status();
  }
  if (StringAt(*current, {"metadata", "annotations", kind_.annotation}) ==
      StringAt(desired, {"metadata", "annotations", kind_.annotation})) {
    return absl::OkStatus();
  }
  const std::string name = StringAt(*current, {"metadata", "name"});
  absl::StatusOr<Value> updated = client_.Update(DaemonSetPath(ns, name), Replacing(*current, desired));
  if (updated.ok()) {
    log_.Info(absl::StrCat(kind_.what, " DaemonSet updated"),
              {{"module", key}, {"daemonSet", name}, {"version", version}});
  }
  return updated.status();
}

ReconcileResult ModuleDaemonSetWriter::Reconcile(const WriterView& view, const std::string& key) {
  const std::optional<ModuleKey> k = SplitModuleKey(key);
  if (!k) {
    return ReconcileResult::Ok();
  }
  const std::optional<source::ModuleMeta> meta = view.Module(key);
  const std::optional<api::Module> module = view.ModuleObject(key);

  kube::ListOptions options;
  options.label_selector = absl::StrCat(kModuleNameLabel, "=", k->name);
  absl::StatusOr<kube::ObjectList> listed = client_.List(DaemonSetPath(k->ns), options);
  const bool wanted = meta && !meta->deleting && module && kind_.wanted(*module);
  if (!listed.ok()) {
    if (absl::IsPermissionDenied(listed.status()) && !wanted) {
      // No DaemonSet access in this namespace (deploy/ grants it where Modules live): then
      // kmodd made none here, and none is wanted.
      return ReconcileResult::Ok();
    }
    log_.Warn(absl::StrCat("cannot list ", kind_.what, " DaemonSets"),
              {{"module", key}, {"error", listed.status().ToString()}});
    if (wanted && absl::IsPermissionDenied(listed.status())) {
      Refused(*meta, listed.status());
    }
    return ReconcileResult::Error(listed.status());
  }
  std::vector<Value> ours;
  for (Value& ds : listed->items) {
    if (kind_.owns_role(StringAt(ds, {"metadata", "labels", kRoleLabel}))) {
      ours.push_back(std::move(ds));
    }
  }

  if (!wanted) {
    refusals_.Cleared(key, kSubject);
    absl::Status s = DeleteAll(ours);
    return s.ok() ? ReconcileResult::Ok() : ReconcileResult::Error(s);
  }

  absl::StatusOr<Value> built = kind_.build(*module);
  if (!built.ok()) {
    Refused(*meta, built.status());
    return ReconcileResult::Error(built.status());
  }
  const Value desired = WithHash(*built, kind_.annotation);

  const std::string version = DaemonSetVersion(desired, *module);
  const Value* current = nullptr;
  for (const Value& ds : ours) {
    if (DaemonSetVersion(ds, *module) == version) {
      current = &ds;
      break;
    }
  }
  if (absl::Status written = Write(key, current, desired, version); !written.ok()) {
    if (absl::IsInvalidArgument(written)) {
      Refused(*meta, written);
    } else {
      log_.Warn(absl::StrCat("cannot write the ", kind_.what, " DaemonSet"),
                {{"module", key}, {"error", written.ToString()}});
    }
    return ReconcileResult::Error(written);
  }
  refusals_.Cleared(key, kSubject);

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

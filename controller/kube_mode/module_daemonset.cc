#include "controller/kube_mode/module_daemonset.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/module_value.h"
#include "api/names.h"
#include "common/json.h"
#include "common/value_build.h"
#include "controller/kube_mode/node_labeler.h"

namespace kmodd::server {

namespace {

// A kept-as-is sub-object as a Value; nullopt when absent.
absl::StatusOr<std::optional<Value>> FromOpaque(const api::Opaque& o, const std::string& field) {
  if (!o.Present()) {
    return std::nullopt;
  }
  absl::StatusOr<Value> v = ParseJson(o.json);
  if (!v.ok() || !v->IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": want an object, as Kubernetes defines it",
                     v.ok() ? "" : absl::StrCat(" (", v.status().message(), ")")));
  }
  return std::optional<Value>(*std::move(v));
}

// Sets `key` to the opaque sub-object when it is present.
absl::Status SetOpaque(Value& into, const char* key, const api::Opaque& o,
                       const std::string& field) {
  absl::StatusOr<std::optional<Value>> v = FromOpaque(o, field);
  if (!v.ok()) {
    return v.status();
  }
  if (v->has_value()) {
    into.Set(key, **std::move(v));
  }
  return absl::OkStatus();
}

Value MountValue(const api::VolumeMount& m) {
  Value v = Value::EmptyMap();
  v.Set("name", m.name);
  v.Set("mountPath", m.mount_path);
  if (m.read_only) {
    v.Set("readOnly", true);
  }
  if (!m.sub_path.empty()) {
    v.Set("subPath", m.sub_path);
  }
  if (!m.sub_path_expr.empty()) {
    v.Set("subPathExpr", m.sub_path_expr);
  }
  if (!m.mount_propagation.empty()) {
    v.Set("mountPropagation", m.mount_propagation);
  }
  if (!m.recursive_read_only.empty()) {
    v.Set("recursiveReadOnly", m.recursive_read_only);
  }
  return v;
}

// What kmodd adds to a container beside the user's fields.
struct ContainerPresets {
  std::vector<api::VolumeMount> mounts;
  std::vector<Value> env;
  std::optional<Value> liveness_probe;
};

// The presets the user does not name, then the user's variables.
absl::StatusOr<Value> EnvValue(const api::CommonContainerSpec& c, const std::vector<Value>& presets,
                               const std::string& field) {
  Value env = Value::EmptyList();
  std::set<std::string> named;
  for (const api::EnvVar& e : c.env) {
    named.insert(e.name);
  }
  for (const Value& p : presets) {
    if (named.count(StringAt(p, {"name"})) == 0) {
      env.Append(p);
    }
  }
  for (size_t i = 0; i < c.env.size(); ++i) {
    Value e = Value::EmptyMap();
    e.Set("name", c.env[i].name);
    if (!c.env[i].value.empty()) {
      e.Set("value", c.env[i].value);
    }
    if (absl::Status st = SetOpaque(e, "valueFrom", c.env[i].value_from,
                                    absl::StrCat(field, ".env[", i, "].valueFrom"));
        !st.ok()) {
      return st;
    }
    env.Append(std::move(e));
  }
  return env;
}

absl::StatusOr<Value> ContainerValue(const api::CommonContainerSpec& c, const std::string& name,
                                     const ContainerPresets& presets, const std::string& field) {
  Value v = Value::EmptyMap();
  v.Set("name", name);
  v.Set("image", c.image);
  if (!c.command.empty()) {
    v.Set("command", StringListValue(c.command));
  }
  if (!c.args.empty()) {
    v.Set("args", StringListValue(c.args));
  }
  absl::StatusOr<Value> env = EnvValue(c, presets.env, field);
  if (!env.ok()) {
    return env.status();
  }
  if (!env->AsList().empty()) {
    v.Set("env", *std::move(env));
  }
  if (!c.image_pull_policy.empty()) {
    v.Set("imagePullPolicy", c.image_pull_policy);
  }
  if (absl::Status st = SetOpaque(v, "resources", c.resources, field + ".resources"); !st.ok()) {
    return st;
  }
  if (c.security_context.Present()) {
    if (absl::Status st =
            SetOpaque(v, "securityContext", c.security_context, field + ".securityContext");
        !st.ok()) {
      return st;
    }
  } else {
    v.Set("securityContext", Value::Map{{"privileged", true}});  // KMM's default
  }
  if (absl::Status st = SetOpaque(v, "startupProbe", c.startup_probe, field + ".startupProbe");
      !st.ok()) {
    return st;
  }
  if (c.liveness_probe.Present()) {
    if (absl::Status st =
            SetOpaque(v, "livenessProbe", c.liveness_probe, field + ".livenessProbe");
        !st.ok()) {
      return st;
    }
  } else if (presets.liveness_probe.has_value()) {
    v.Set("livenessProbe", *presets.liveness_probe);
  }
  Value mounts = Value::EmptyList();
  for (const api::VolumeMount& m : presets.mounts) {
    mounts.Append(MountValue(m));
  }
  for (const api::VolumeMount& m : c.volume_mounts) {
    mounts.Append(MountValue(m));
  }
  if (!mounts.AsList().empty()) {
    v.Set("volumeMounts", std::move(mounts));
  }
  return v;
}

absl::StatusOr<Value> VolumeValue(const api::Volume& vol, const std::string& field) {
  Value v = Value::EmptyMap();
  v.Set("name", vol.name);
  if (vol.host_path.has_value()) {
    Value hp = Value::EmptyMap();
    hp.Set("path", vol.host_path->path);
    if (!vol.host_path->type.empty()) {
      hp.Set("type", vol.host_path->type);
    }
    v.Set("hostPath", std::move(hp));
  }
  absl::StatusOr<std::optional<Value>> others = FromOpaque(vol.other_sources, field);
  if (!others.ok()) {
    return others.status();
  }
  if (others->has_value()) {
    for (const auto& [k, source] : (*others)->AsMap()) {
      v.Set(k, source);
    }
  }
  return v;
}

// The presets a user mount does not replace (one at the same cleaned mountPath in the
// container), under volume names the user's volumes leave free.
std::vector<PresetHostPath> KeptPresets(std::vector<PresetHostPath> presets,
                                        const api::CommonContainerSpec& c,
                                        const std::vector<api::Volume>& volumes) {
  std::set<std::string> user_paths;
  for (const api::VolumeMount& m : c.volume_mounts) {
    user_paths.insert(api::CleanPath(m.mount_path));
  }
  std::set<std::string> taken;
  for (const api::Volume& v : volumes) {
    taken.insert(v.name);
  }
  std::vector<PresetHostPath> kept;
  for (PresetHostPath& p : presets) {
    if (user_paths.count(api::CleanPath(p.path)) != 0) {
      continue;  // the user's mount wins
    }
    const std::string base = p.volume;
    for (int i = 0; taken.count(p.volume) != 0; ++i) {
      p.volume = absl::StrCat(base, "-", i);
    }
    taken.insert(p.volume);
    kept.push_back(std::move(p));
  }
  return kept;
}

// kmodd's hostPaths, then the user's volumes; the kept presets' mounts into `mounts`.
absl::StatusOr<Value> VolumesValue(const DaemonSetRecipe& r,
                                   std::vector<api::VolumeMount>& mounts) {
  Value volumes = Value::EmptyList();
  for (const PresetHostPath& p : KeptPresets(r.host_paths, *r.container, *r.volumes)) {
    mounts.push_back(api::VolumeMount{.name = p.volume, .mount_path = p.path});
    volumes.Append(Value::Map{
        {"name", p.volume}, {"hostPath", Value::Map{{"path", p.path}, {"type", p.type}}}});
  }
  for (size_t i = 0; i < r.volumes->size(); ++i) {
    absl::StatusOr<Value> v =
        VolumeValue((*r.volumes)[i], absl::StrCat(r.field, ".volumes[", i, "]"));
    if (!v.ok()) {
      return v.status();
    }
    volumes.Append(*std::move(v));
  }
  return volumes;
}

absl::StatusOr<Value> PodSpecValue(const api::Module& m, const DaemonSetRecipe& r) {
  ContainerPresets presets{.env = r.env, .liveness_probe = r.liveness_probe};
  absl::StatusOr<Value> volumes = VolumesValue(r, presets.mounts);
  if (!volumes.ok()) {
    return volumes.status();
  }
  Value pod = Value::EmptyMap();
  if (r.init_container != nullptr) {
    absl::StatusOr<Value> init = ContainerValue(*r.init_container, r.role + "-init", {},
                                                r.field + ".initContainer");
    if (!init.ok()) {
      return init.status();
    }
    pod.Set("initContainers", Value::List{*std::move(init)});
  }
  absl::StatusOr<Value> main = ContainerValue(*r.container, r.role, presets, r.field + ".container");
  if (!main.ok()) {
    return main.status();
  }
  pod.Set("containers", Value::List{*std::move(main)});
  if (r.host_network) {
    pod.Set("hostNetwork", true);
  }
  pod.Set("priorityClassName", "system-node-critical");
  if (m.spec.image_repo_secret.has_value() && !m.spec.image_repo_secret->name.empty()) {
    pod.Set("imagePullSecrets", Value::List{Value::Map{{"name", m.spec.image_repo_secret->name}}});
  }
  pod.Set("nodeSelector", StringMapValue(r.selection.node_selector));
  if (!r.service_account_name.empty()) {
    pod.Set("serviceAccountName", r.service_account_name);
  }
  if (!volumes->AsList().empty()) {
    pod.Set("volumes", *std::move(volumes));
  }
  if (!m.spec.tolerations.empty()) {
    Value tolerations = Value::EmptyList();
    for (const api::Toleration& t : m.spec.tolerations) {
      tolerations.Append(api::TolerationValue(t));
    }
    pod.Set("tolerations", std::move(tolerations));
  }
  if (r.automount_service_account_token.has_value()) {
    pod.Set("automountServiceAccountToken", *r.automount_service_account_token);
  }
  return pod;
}

}  // namespace

std::string SchedulePodVersionLabel(const std::string& ns, const std::string& name) {
  return absl::StrCat("beta.kmm.node.kubernetes.io/version-schedule-pod.", ns, ".", name);
}

PluginSelection ModuleDaemonSetSelection(const api::Module& m, const std::string& role,
                                         const std::string& gate_label) {
  const std::string& ns = m.metadata.namespace_;
  const std::string& name = m.metadata.name;
  PluginSelection s;
  s.labels = {{kModuleNameLabel, name}, {kRoleLabel, role}};
  if (!m.spec.module_loader.has_value()) {
    s.node_selector = m.spec.selector;
    return s;
  }
  s.node_selector = {{ReadyLabel(ns, name), ""}};
  if (!gate_label.empty()) {
    s.node_selector[gate_label] = "";
  }
  if (const std::string& version = m.spec.module_loader->container.version; !version.empty()) {
    s.labels[SchedulePodVersionLabel(ns, name)] = version;
    s.node_selector[SchedulePodVersionLabel(ns, name)] = version;
  }
  return s;
}

std::string DaemonSetVersion(const Value& daemon_set, const api::Module& m) {
  const Value* labels = Lookup(daemon_set, {"metadata", "labels"});
  if (labels == nullptr) {
    return "";
  }
  const Value* v = labels->Find(SchedulePodVersionLabel(m.metadata.namespace_, m.metadata.name));
  return v != nullptr && v->IsString() ? v->AsString() : "";
}

absl::StatusOr<Value> ModuleDaemonSet(const api::Module& m, const DaemonSetRecipe& r) {
  absl::StatusOr<Value> pod = PodSpecValue(m, r);
  if (!pod.ok()) {
    return pod.status();
  }
  const Value labels = StringMapValue(r.selection.labels);
  Value metadata = Value::EmptyMap();
  metadata.Set("namespace", m.metadata.namespace_);
  metadata.Set("generateName", absl::StrCat(m.metadata.name, "-", r.role, "-"));
  metadata.Set("labels", labels);
  metadata.Set("ownerReferences",
               Value::List{Value::Map{{"apiVersion", "kmm.sigs.x-k8s.io/v1beta1"},
                                      {"kind", "Module"},
                                      {"name", m.metadata.name},
                                      {"uid", m.metadata.uid},
                                      {"controller", true},
                                      {"blockOwnerDeletion", true}}});
  Value spec = Value::EmptyMap();
  spec.Set("selector", Value::Map{{"matchLabels", labels}});
  spec.Set("template", Value::Map{{"metadata", Value::Map{{"labels", labels}}},
                                  {"spec", *std::move(pod)}});
  return Value(Value::Map{{"apiVersion", "apps/v1"},
                          {"kind", "DaemonSet"},
                          {"metadata", std::move(metadata)},
                          {"spec", std::move(spec)}});
}

}  // namespace kmodd::server

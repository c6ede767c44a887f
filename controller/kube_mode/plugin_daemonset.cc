#include "controller/kube_mode/plugin_daemonset.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "api/module_value.h"
#include "common/value_build.h"
#include "absl/strings/str_cat.h"
#include "api/names.h"
#include "common/json.h"
#include "controller/kube_mode/node_labeler.h"
#include "controller/kube_mode/node_labels.h"
#include "controller/placement/selection.h"

namespace kmodd::server {

namespace {

constexpr char kDevicePluginsVolume[] = "kubelet-device-plugins";

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

// What kmodd mounts into a container beside the user's mounts.
struct Preset {
  api::VolumeMount mount;
  api::HostPathVolumeSource host_path;
};

absl::StatusOr<Value> ContainerValue(const api::CommonContainerSpec& c, const std::string& name,
                                     const std::vector<api::VolumeMount>& presets,
                                     const std::string& field) {
  Value v = Value::EmptyMap();
  v.Set("name", name);
  v.Set("image", c.image);
  if (!c.command.empty()) {
    v.Set("command", StringListValue(c.command));
  }
  if (!c.args.empty()) {
    v.Set("args", StringListValue(c.args));
  }
  if (!c.env.empty()) {
    Value env = Value::EmptyList();
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
    v.Set("env", std::move(env));
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
  if (absl::Status st =
          SetOpaque(v, "livenessProbe", c.liveness_probe, field + ".livenessProbe");
      !st.ok()) {
    return st;
  }
  Value mounts = Value::EmptyList();
  for (const api::VolumeMount& m : presets) {
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
std::vector<Preset> KeptPresets(std::vector<Preset> presets, const api::CommonContainerSpec& c,
                                const std::vector<api::Volume>& volumes) {
  std::set<std::string> user_paths;
  for (const api::VolumeMount& m : c.volume_mounts) {
    user_paths.insert(api::CleanPath(m.mount_path));
  }
  std::set<std::string> taken;
  for (const api::Volume& v : volumes) {
    taken.insert(v.name);
  }
  std::vector<Preset> kept;
  for (Preset& p : presets) {
    if (user_paths.count(api::CleanPath(p.mount.mount_path)) != 0) {
      continue;  // the user's mount wins
    }
    const std::string base = p.mount.name;
    for (int i = 0; taken.count(p.mount.name) != 0; ++i) {
      p.mount.name = absl::StrCat(base, "-", i);
    }
    taken.insert(p.mount.name);
    kept.push_back(std::move(p));
  }
  return kept;
}

}  // namespace

std::string DevicePluginTargetLabel(const std::string& ns, const std::string& name) {
  return absl::StrCat(kLabelPrefix, ns, ".", name, ".device-plugin-target");
}

std::string DevicePluginReadyLabel(const std::string& ns, const std::string& name) {
  return absl::StrCat(kLabelPrefix, ns, ".", name, ".device-plugin-ready");
}

std::string SchedulePodVersionLabel(const std::string& ns, const std::string& name) {
  return absl::StrCat("beta.kmm.node.kubernetes.io/version-schedule-pod.", ns, ".", name);
}

bool DevicePluginTargets(const api::Module& m, const std::map<std::string, std::string>& labels,
                         bool unschedulable, const std::vector<api::Taint>& taints) {
  return m.spec.device_plugin.has_value() &&
         placement::PodSchedulable(m, labels, unschedulable, taints);
}

PluginSelection DevicePluginSelection(const api::Module& m) {
  const std::string& ns = m.metadata.namespace_;
  const std::string& name = m.metadata.name;
  PluginSelection s;
  s.labels = {{kModuleNameLabel, name}, {kRoleLabel, kDevicePluginRole}};
  if (!m.spec.module_loader.has_value()) {
    s.node_selector = m.spec.selector;  // an in-tree driver: no .ready label to wait for
    return s;
  }
  s.node_selector = {{ReadyLabel(ns, name), ""},
                     {DevicePluginTargetLabel(ns, name), ""}};
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

absl::StatusOr<Value> DevicePluginDaemonSet(const api::Module& m) {
  if (!m.spec.device_plugin.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Module ", m.Key(), " has no spec.devicePlugin"));
  }
  const api::DevicePluginSpec& dp = *m.spec.device_plugin;
  const PluginSelection sel = DevicePluginSelection(m);

  const std::vector<Preset> presets = KeptPresets(
      {Preset{api::VolumeMount{.name = kDevicePluginsVolume, .mount_path = kKubeletDevicePluginsPath},
              api::HostPathVolumeSource{.path = kKubeletDevicePluginsPath, .type = "Directory"}}},
      dp.container, dp.volumes);
  std::vector<api::VolumeMount> preset_mounts;
  Value volumes = Value::EmptyList();
  for (const Preset& p : presets) {
    preset_mounts.push_back(p.mount);
    volumes.Append(Value::Map{
        {"name", p.mount.name},
        {"hostPath", Value::Map{{"path", p.host_path.path}, {"type", p.host_path.type}}}});
  }
  for (size_t i = 0; i < dp.volumes.size(); ++i) {
    absl::StatusOr<Value> v =
        VolumeValue(dp.volumes[i], absl::StrCat("spec.devicePlugin.volumes[", i, "]"));
    if (!v.ok()) {
      return v.status();
    }
    volumes.Append(*std::move(v));
  }

  Value pod = Value::EmptyMap();
  if (dp.init_container.has_value()) {
    absl::StatusOr<Value> init = ContainerValue(*dp.init_container, "device-plugin-init", {},
                                                "spec.devicePlugin.initContainer");
    if (!init.ok()) {
      return init.status();
    }
    pod.Set("initContainers", Value::List{*std::move(init)});
  }
  absl::StatusOr<Value> main =
      ContainerValue(dp.container, "device-plugin", preset_mounts, "spec.devicePlugin.container");
  if (!main.ok()) {
    return main.status();
  }
  pod.Set("containers", Value::List{*std::move(main)});
  pod.Set("priorityClassName", "system-node-critical");
  if (m.spec.image_repo_secret.has_value() && !m.spec.image_repo_secret->name.empty()) {
    pod.Set("imagePullSecrets", Value::List{Value::Map{{"name", m.spec.image_repo_secret->name}}});
  }
  pod.Set("nodeSelector", StringMapValue(sel.node_selector));
  if (!dp.service_account_name.empty()) {
    pod.Set("serviceAccountName", dp.service_account_name);
  }
  if (!volumes.AsList().empty()) {
    pod.Set("volumes", std::move(volumes));
  }
  if (!m.spec.tolerations.empty()) {
    Value tolerations = Value::EmptyList();
    for (const api::Toleration& t : m.spec.tolerations) {
      tolerations.Append(api::TolerationValue(t));
    }
    pod.Set("tolerations", std::move(tolerations));
  }
  if (dp.automount_service_account_token.has_value()) {
    pod.Set("automountServiceAccountToken", *dp.automount_service_account_token);
  }

  Value metadata = Value::EmptyMap();
  metadata.Set("namespace", m.metadata.namespace_);
  metadata.Set("generateName", absl::StrCat(m.metadata.name, "-device-plugin-"));
  metadata.Set("labels", StringMapValue(sel.labels));
  metadata.Set("ownerReferences",
               Value::List{Value::Map{{"apiVersion", "kmm.sigs.x-k8s.io/v1beta1"},
                                      {"kind", "Module"},
                                      {"name", m.metadata.name},
                                      {"uid", m.metadata.uid},
                                      {"controller", true},
                                      {"blockOwnerDeletion", true}}});
  Value spec = Value::EmptyMap();
  spec.Set("selector", Value::Map{{"matchLabels", StringMapValue(sel.labels)}});
  spec.Set("template",
           Value::Map{{"metadata", Value::Map{{"labels", StringMapValue(sel.labels)}}},
                      {"spec", std::move(pod)}});
  return Value(Value::Map{{"apiVersion", "apps/v1"},
                          {"kind", "DaemonSet"},
                          {"metadata", std::move(metadata)},
                          {"spec", std::move(spec)}});
}

}  // namespace kmodd::server

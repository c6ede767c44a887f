#pragma once

// The Module resource, field for field KMM's kmm.sigs.x-k8s.io/v1beta1 Module.
// Where KMM distinguishes "absent" from "empty" (a Go nil pointer or nil slice), the field
// is a std::optional here. Sub-trees that are plain Kubernetes core types which kmodd
// passes through without interpreting (env valueFrom, non-hostPath volume sources,
// resources, DRA selectors) are kept as Opaque YAML so that nothing is lost.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/object_meta.h"
#include "api/opaque.h"

namespace kmodd::api {

inline constexpr char kGroupVersion[] = "kmm.sigs.x-k8s.io/v1beta1";
inline constexpr char kDefaultDirName[] = "/opt";
// What KMM writes into a NodeModulesConfig entry for a Module that names no service account.
inline constexpr char kDefaultServiceAccountName[] = "default";

struct LocalObjectReference {
  std::string name;
  bool operator==(const LocalObjectReference&) const = default;
};

struct Toleration {
  std::string key;
  std::string op;  // "operator": "", "Equal" or "Exists"
  std::string value;
  std::string effect;  // "", NoSchedule, PreferNoSchedule, NoExecute
  std::optional<int64_t> toleration_seconds;
  bool operator==(const Toleration&) const = default;
};

struct BuildArg {
  std::string name;
  std::string value;
  bool operator==(const BuildArg&) const = default;
};

struct TlsOptions {
  bool insecure = false;
  bool insecure_skip_tls_verify = false;
  bool operator==(const TlsOptions&) const = default;
};

struct KanikoParams {
  std::string tag;
  bool operator==(const KanikoParams&) const = default;
};

struct Build {
  std::vector<BuildArg> build_args;
  std::optional<LocalObjectReference> dockerfile_config_map;
  TlsOptions base_image_registry_tls;
  std::vector<LocalObjectReference> secrets;
  std::optional<KanikoParams> kaniko_params;
  std::map<std::string, std::string> selector;
  bool operator==(const Build&) const = default;
};

struct Sign {
  std::string unsigned_image;
  TlsOptions unsigned_image_registry_tls;
  std::optional<LocalObjectReference> key_secret;
  std::optional<LocalObjectReference> cert_secret;
  std::vector<std::string> files_to_sign;
  bool operator==(const Sign&) const = default;
};

struct KernelMapping {
  std::optional<Build> build;
  std::optional<Sign> sign;
  std::string container_image;
  std::string literal;
  std::optional<TlsOptions> registry_tls;
  std::string regexp;
  std::string in_tree_module_to_remove;  // deprecated single-module form
  std::optional<std::vector<std::string>> in_tree_modules_to_remove;
  bool operator==(const KernelMapping&) const = default;
};

struct ModprobeArgs {
  std::vector<std::string> load;
  std::vector<std::string> unload;
  bool operator==(const ModprobeArgs&) const = default;
};

struct ModprobeSpec {
  std::string module_name;
  std::vector<std::string> parameters;
  std::string dir_name;  // empty means the default, kDefaultDirName
  std::optional<ModprobeArgs> args;
  std::optional<ModprobeArgs> raw_args;
  std::string firmware_path;
  std::optional<std::vector<std::string>> modules_loading_order;
  bool operator==(const ModprobeSpec&) const = default;

  // dirName with KMM's default applied.
  const std::string& EffectiveDirName() const;
};

struct ModuleLoaderContainerSpec {
  std::optional<Build> build;
  std::optional<Sign> sign;
  std::string version;
  std::string container_image;
  std::string image_pull_policy;  // "", Always, IfNotPresent, Never
  std::vector<KernelMapping> kernel_mappings;
  ModprobeSpec modprobe;
  TlsOptions registry_tls;
  std::string in_tree_module_to_remove;  // deprecated single-module form
  std::optional<std::vector<std::string>> in_tree_modules_to_remove;
  bool operator==(const ModuleLoaderContainerSpec&) const = default;
};

struct ModuleLoaderSpec {
  ModuleLoaderContainerSpec container;
  std::string service_account_name;
  bool operator==(const ModuleLoaderSpec&) const = default;

  // serviceAccountName with KMM's default applied, as its NodeModulesConfig carries it.
  const std::string& EffectiveServiceAccountName() const;
};

struct EnvVar {
  std::string name;
  std::string value;
  Opaque value_from;
  bool operator==(const EnvVar&) const = default;
};

struct VolumeMount {
  std::string name;
  std::string mount_path;
  bool read_only = false;
  std::string sub_path;
  std::string sub_path_expr;
  std::string mount_propagation;
  std::string recursive_read_only;
  bool operator==(const VolumeMount&) const = default;
};

struct HostPathVolumeSource {
  std::string path;
  std::string type;
  bool operator==(const HostPathVolumeSource&) const = default;
};

struct Volume {
  std::string name;
  std::optional<HostPathVolumeSource> host_path;
  // Every other volume source (configMap, secret, emptyDir, ...), passed through.
  Opaque other_sources;
  bool operator==(const Volume&) const = default;
};

struct CommonContainerSpec {
  std::vector<std::string> command;
  std::vector<std::string> args;
  std::vector<EnvVar> env;
  std::string image;
  std::string image_pull_policy;
  Opaque resources;
  std::vector<VolumeMount> volume_mounts;
  // KMM's 2026 additions (upstream PRs #1322, #1323), Kubernetes' own shapes, kept as is.
  // Without a securityContext the container is privileged, as before them; the probes
  // are refused on init containers.
  Opaque security_context;
  Opaque startup_probe;
  Opaque liveness_probe;
  bool operator==(const CommonContainerSpec&) const = default;
};

struct DevicePluginSpec {
  CommonContainerSpec container;
  std::optional<CommonContainerSpec> init_container;
  std::string service_account_name;
  std::vector<Volume> volumes;
  std::optional<bool> automount_service_account_token;
  bool operator==(const DevicePluginSpec&) const = default;
};

struct DeviceClassSpec {
  std::string name;
  Opaque selectors;
  Opaque config;
  bool operator==(const DeviceClassSpec&) const = default;
};

struct DraSpec {
  CommonContainerSpec container;
  std::optional<CommonContainerSpec> init_container;
  std::string service_account_name;
  std::vector<Volume> volumes;
  std::optional<bool> automount_service_account_token;
  std::string driver_name;
  std::vector<DeviceClassSpec> device_classes;
  bool operator==(const DraSpec&) const = default;
};

struct ModuleSpec {
  std::optional<DevicePluginSpec> device_plugin;
  std::optional<DraSpec> dra;
  std::optional<ModuleLoaderSpec> module_loader;
  std::optional<LocalObjectReference> image_repo_secret;
  std::map<std::string, std::string> selector;
  std::vector<Toleration> tolerations;
  std::optional<int64_t> image_rebuild_trigger_generation;
  bool operator==(const ModuleSpec&) const = default;
};

struct DaemonSetStatus {
  int32_t nodes_matching_selector_number = 0;
  int32_t desired_number = 0;
  int32_t available_number = 0;
  bool operator==(const DaemonSetStatus&) const = default;
};

struct ModuleStatus {
  DaemonSetStatus device_plugin;
  DaemonSetStatus dra;
  DaemonSetStatus module_loader;
  std::optional<int64_t> image_rebuild_trigger_generation;
  bool operator==(const ModuleStatus&) const = default;
};

struct Module {
  ObjectMeta metadata;
  ModuleSpec spec;
  ModuleStatus status;
  // A digest of the spec as decoded (defaults applied), the same in both modes for the
  // same spec: it names one rollout of the Module (module_policy.h). Set by the decoder.
  std::string revision;
  bool operator==(const Module&) const = default;

  // "<namespace>/<name>", the key used everywhere a Module is named.
  std::string Key() const { return metadata.namespace_ + "/" + metadata.name; }
};

}  // namespace kmodd::api

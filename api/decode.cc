#include "api/decode.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/crd_rules.h"
#include "api/names.h"
#include "api/yaml_reader.h"

namespace kmodd::api {

namespace {

constexpr const char* kObjectMetaFields[] = {
    "generateName",      "selfLink",        "creationTimestamp", "deletionTimestamp",
    "deletionGracePeriodSeconds", "ownerReferences", "finalizers", "managedFields"};

void ReadMeta(YamlReader& r, ObjectMeta& m) {
  r.String("name", m.name);
  r.String("namespace", m.namespace_);
  r.StringMap("labels", m.labels);
  r.StringMap("annotations", m.annotations);
  r.String("uid", m.uid);
  r.String("resourceVersion", m.resource_version);
  r.Int64("generation", m.generation);
  for (const char* f : kObjectMetaFields) {
    r.Ignore(f);
  }
}

void ReadRef(YamlReader& r, LocalObjectReference& ref) { r.String("name", ref.name); }

void ReadTls(YamlReader& r, TlsOptions& t) {
  r.Bool("insecure", t.insecure);
  r.Bool("insecureSkipTLSVerify", t.insecure_skip_tls_verify);
}

void ReadToleration(YamlReader& r, Toleration& t) {
  r.String("key", t.key);
  r.String("operator", t.op);
  r.String("value", t.value);
  r.String("effect", t.effect);
  r.OptionalInt64("tolerationSeconds", t.toleration_seconds);
}

void ReadBuild(YamlReader& r, Build& b) {
  r.ObjectList("buildArgs", b.build_args, [](YamlReader& s, BuildArg& a) {
    s.String("name", a.name);
    s.String("value", a.value);
  });
  r.OptionalObject("dockerfileConfigMap", b.dockerfile_config_map, ReadRef);
  r.Object("baseImageRegistryTLS", b.base_image_registry_tls, ReadTls);
  r.ObjectList("secrets", b.secrets, ReadRef);
  r.OptionalObject("kanikoParams", b.kaniko_params,
                   [](YamlReader& s, KanikoParams& k) { s.String("tag", k.tag); });
  r.StringMap("selector", b.selector);
}

void ReadSign(YamlReader& r, Sign& s) {
  r.String("unsignedImage", s.unsigned_image);
  r.Object("unsignedImageRegistryTLS", s.unsigned_image_registry_tls, ReadTls);
  r.OptionalObject("keySecret", s.key_secret, ReadRef);
  r.OptionalObject("certSecret", s.cert_secret, ReadRef);
  r.StringList("filesToSign", s.files_to_sign);
}

void ReadMapping(YamlReader& r, KernelMapping& m) {
  r.OptionalObject("build", m.build, ReadBuild);
  r.OptionalObject("sign", m.sign, ReadSign);
  r.String("containerImage", m.container_image);
  r.String("literal", m.literal);
  r.OptionalObject("registryTLS", m.registry_tls, ReadTls);
  r.String("regexp", m.regexp);
  r.String("inTreeModuleToRemove", m.in_tree_module_to_remove);
  r.OptionalStringList("inTreeModulesToRemove", m.in_tree_modules_to_remove);
}

void ReadModprobeArgs(YamlReader& r, ModprobeArgs& a) {
  r.StringList("load", a.load);
  r.StringList("unload", a.unload);
}

void ReadModprobe(YamlReader& r, ModprobeSpec& m) {
  r.String("moduleName", m.module_name);
  r.StringList("parameters", m.parameters);
  r.String("dirName", m.dir_name);
  r.OptionalObject("args", m.args, ReadModprobeArgs);
  r.OptionalObject("rawArgs", m.raw_args, ReadModprobeArgs);
  r.String("firmwarePath", m.firmware_path);
  r.OptionalStringList("modulesLoadingOrder", m.modules_loading_order);
}

void ReadLoaderContainer(YamlReader& r, ModuleLoaderContainerSpec& c) {
  r.OptionalObject("build", c.build, ReadBuild);
  r.OptionalObject("sign", c.sign, ReadSign);
  r.String("version", c.version);
  r.String("containerImage", c.container_image);
  r.String("imagePullPolicy", c.image_pull_policy);
  r.ObjectList("kernelMappings", c.kernel_mappings, ReadMapping);
  r.Object("modprobe", c.modprobe, ReadModprobe);
  // The CRD's default has filled an absent or null dirName: an empty one was written so,
  // and KMM's worker joins it onto the image's root.
  if (c.modprobe.dir_name.empty()) {
    c.modprobe.dir_name = "/";
  }
  r.Object("registryTLS", c.registry_tls, ReadTls);
  r.String("inTreeModuleToRemove", c.in_tree_module_to_remove);
  r.OptionalStringList("inTreeModulesToRemove", c.in_tree_modules_to_remove);
}

void ReadContainer(YamlReader& r, CommonContainerSpec& c) {
  r.StringList("command", c.command);
  r.StringList("args", c.args);
  r.ObjectList("env", c.env, [](YamlReader& s, EnvVar& e) {
    s.String("name", e.name);
    s.String("value", e.value);
    s.Raw("valueFrom", e.value_from);
  });
  r.String("image", c.image);
  r.String("imagePullPolicy", c.image_pull_policy);
  r.Raw("resources", c.resources);
  r.ObjectList("volumeMounts", c.volume_mounts, [](YamlReader& s, VolumeMount& v) {
    s.String("name", v.name);
    s.String("mountPath", v.mount_path);
    s.Bool("readOnly", v.read_only);
    s.String("subPath", v.sub_path);
    s.String("subPathExpr", v.sub_path_expr);
    s.String("mountPropagation", v.mount_propagation);
    s.String("recursiveReadOnly", v.recursive_read_only);
  });
  r.Raw("securityContext", c.security_context);
  r.Raw("startupProbe", c.startup_probe);
  r.Raw("livenessProbe", c.liveness_probe);
}

constexpr const char* kOtherVolumeSources[] = {
    "emptyDir", "configMap", "secret", "projected", "downwardAPI", "persistentVolumeClaim",
    "ephemeral", "csi", "image", "nfs", "iscsi"};

void ReadVolume(YamlReader& r, Volume& v) {
  r.String("name", v.name);
  r.OptionalObject("hostPath", v.host_path, [](YamlReader& s, HostPathVolumeSource& h) {
    s.String("path", h.path);
    s.String("type", h.type);
  });
  // Other sources are carried as one opaque object keyed by source name.
  std::string others;
  for (const char* src : kOtherVolumeSources) {
    Opaque o;
    r.Raw(src, o);
    if (o.Present()) {
      absl::StrAppend(&others, others.empty() ? "" : ",", "\"", src, "\":", o.json);
    }
  }
  if (!others.empty()) {
    v.other_sources.json = absl::StrCat("{", others, "}");
  }
}

void ReadDevicePlugin(YamlReader& r, DevicePluginSpec& d) {
  r.Object("container", d.container, ReadContainer);
  r.OptionalObject("initContainer", d.init_container, ReadContainer);
  r.String("serviceAccountName", d.service_account_name);
  r.ObjectList("volumes", d.volumes, ReadVolume);
  r.OptionalBool("automountServiceAccountToken", d.automount_service_account_token);
}

void ReadDra(YamlReader& r, DraSpec& d) {
  r.Object("container", d.container, ReadContainer);
  r.OptionalObject("initContainer", d.init_container, ReadContainer);
  r.String("serviceAccountName", d.service_account_name);
  r.ObjectList("volumes", d.volumes, ReadVolume);
  r.OptionalBool("automountServiceAccountToken", d.automount_service_account_token);
  r.String("driverName", d.driver_name);
  r.ObjectList("deviceClasses", d.device_classes, [](YamlReader& s, DeviceClassSpec& c) {
    s.String("name", c.name);
    s.RawList("selectors", c.selectors);
    s.RawList("config", c.config);
  });
}

void ReadSpec(YamlReader& r, ModuleSpec& s) {
  r.OptionalObject("devicePlugin", s.device_plugin, ReadDevicePlugin);
  r.OptionalObject("dra", s.dra, ReadDra);
  r.OptionalObject("moduleLoader", s.module_loader, [](YamlReader& l, ModuleLoaderSpec& m) {
    l.Object("container", m.container, ReadLoaderContainer);
    l.String("serviceAccountName", m.service_account_name);
  });
  r.OptionalObject("imageRepoSecret", s.image_repo_secret, ReadRef);
  r.StringMap("selector", s.selector);
  r.ObjectList("tolerations", s.tolerations, ReadToleration);
  r.OptionalInt64("imageRebuildTriggerGeneration", s.image_rebuild_trigger_generation);
}

void ReadDaemonSetStatus(YamlReader& r, DaemonSetStatus& d) {
  r.Int32("nodesMatchingSelectorNumber", d.nodes_matching_selector_number);
  r.Int32("desiredNumber", d.desired_number);
  r.Int32("availableNumber", d.available_number);
}

void ReadStatus(YamlReader& r, ModuleStatus& s) {
  r.Object("devicePlugin", s.device_plugin, ReadDaemonSetStatus);
  r.Object("dra", s.dra, ReadDaemonSetStatus);
  r.Object("moduleLoader", s.module_loader, ReadDaemonSetStatus);
  r.OptionalInt64("imageRebuildTriggerGeneration", s.image_rebuild_trigger_generation);
  // kmodd's own status (ModuleStatusValue, controller/server/status.h): written by the
  // controller, read back by `kubectl get -o yaml | validate`, never used as input.
  r.Ignore("conditions");
  r.Ignore("nodes");
}

void ReadNode(YamlReader& r, Node& n) {
  r.Object("spec", n, [](YamlReader& s, Node& node) {
    s.Bool("unschedulable", node.unschedulable);
    s.ObjectList("taints", node.taints, [](YamlReader& t, Taint& taint) {
      t.String("key", taint.key);
      t.String("value", taint.value);
      t.String("effect", taint.effect);
    });
  });
  r.Object("status", n, [](YamlReader& s, Node& node) {
    s.Object("nodeInfo", node.node_info, [](YamlReader& i, NodeInfo& info) {
      i.String("kernelVersion", info.kernel_version);
      i.String("bootID", info.boot_id);
      i.String("architecture", info.architecture);
      i.String("osImage", info.os_image);
    });
  });
}

void ReadModuleConfig(YamlReader& r, ModuleConfig& c) {
  r.String("kernelVersion", c.kernel_version);
  r.String("containerImage", c.container_image);
  r.String("imagePullPolicy", c.image_pull_policy);
  r.Bool("insecurePull", c.insecure_pull);
  r.StringList("inTreeModulesToRemove", c.in_tree_modules_to_remove);
  std::string single;  // KMM's deprecated single form, folded into the list
  r.String("inTreeModuleToRemove", single);
  if (!single.empty()) {
    c.in_tree_modules_to_remove.push_back(single);
  }
  r.Object("modprobe", c.modprobe, ReadModprobe);
}

void ReadNodeModule(YamlReader& r, NodeModuleSpec& m) {
  r.String("name", m.name);
  r.String("namespace", m.namespace_);
  r.OptionalObject("imageRepoSecret", m.image_repo_secret, ReadRef);
  r.String("serviceAccountName", m.service_account_name);
  r.ObjectList("tolerations", m.tolerations, ReadToleration);
  r.String("version", m.version);
  r.Object("config", m.config, ReadModuleConfig);
}

// The API server's rules for every object's name and namespace.
void CheckIdentity(const YAML::Node& doc, const ObjectMeta& meta, ReadContext& ctx) {
  if (meta.name.empty()) {
    ctx.Error(doc, "metadata.name", "missing; every Module needs a name");
  } else if (!IsDnsSubdomain(meta.name)) {
    ctx.Error(doc, "metadata.name",
              absl::StrCat(Quote(meta.name), " is not a lowercase RFC 1123 subdomain, which the "
                           "API server requires of every name; use ", kDnsSubdomainRule));
  }
  if (!IsDnsLabel(meta.namespace_)) {
    ctx.Error(doc, "metadata.namespace",
              absl::StrCat(Quote(meta.namespace_), " is not a lowercase RFC 1123 label, which "
                           "the API server requires of a namespace; use ", kDnsLabelRule));
  }
}

// FNV-1a (64 bits) of the spec's JSON, in hex: a Module's revision (module.h). Not a
// security digest: it only tells one spec from the next.
std::string SpecRevision(const YAML::Node& spec) {
  const std::string json = IsAbsentOrNull(spec) ? std::string("{}") : CanonicalJson(spec);
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : json) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(12, '0');
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = kHex[(h >> (60 - 4 * i)) & 0xf];
  }
  return out;
}

void ReadAmount(YamlReader& r, const char* key, std::optional<NodeAmount>& out, ReadContext& ctx,
                const YAML::Node& doc) {
  std::string text;
  const std::string path = r.Path().empty() ? key : absl::StrCat(r.Path(), ".", key);
  r.IntOrString(key, text);
  if (text.empty()) {
    return;
  }
  std::string error;
  out = ParseNodeAmount(text, error);
  if (!out) {
    ctx.Error(doc, path, error);
  }
}

// One readiness check: its name, its timeout and exactly one kind.
void ReadCheck(YamlReader& c, ReadinessCheck& check, ReadContext& ctx) {
  c.String("name", check.name);
  c.Int64("timeoutSeconds", check.timeout_seconds);
  struct PathSpec {
    std::string path;
    std::optional<std::string> equals, contains;
  };
  struct DeviceSpec {
    std::string glob;
    int64_t count = 1;
  };
  struct LogSpec {
    std::string pattern;
    int64_t seconds = kDefaultKernelLogSeconds;
  };
  struct StableSpec {
    std::string path;
    int64_t seconds = 0;
  };
  std::optional<PathSpec> path;
  std::optional<DeviceSpec> devices;
  std::optional<LogSpec> log;
  std::optional<StableSpec> stable;
  c.OptionalObject("path", path, [](YamlReader& p, PathSpec& v) {
    p.String("path", v.path);
    p.OptionalString("equals", v.equals);
    p.OptionalString("contains", v.contains);
  });
  c.OptionalObject("devices", devices, [](YamlReader& p, DeviceSpec& v) {
    p.String("glob", v.glob);
    p.Int64("count", v.count);
  });
  c.OptionalObject("kernelLog", log, [](YamlReader& p, LogSpec& v) {
    p.String("pattern", v.pattern);
    p.Int64("seconds", v.seconds);
  });
  c.OptionalObject("stable", stable, [](YamlReader& p, StableSpec& v) {
    p.String("path", v.path);
    p.Int64("seconds", v.seconds);
  });
  const int kinds = int(path.has_value()) + int(devices.has_value()) + int(log.has_value()) +
                    int(stable.has_value());
  if (kinds != 1) {
    ctx.Error(c.At(), c.Path(),
              absl::StrCat(kinds == 0 ? "no kind given" : "more than one kind given",
                           ": give exactly one of path, devices, kernelLog, stable"));
  }
  if (path) {
    check.kind = ReadinessCheck::Kind::kPath;
    check.path = path->path;
    check.equals = path->equals;
    check.contains = path->contains;
  } else if (devices) {
    check.kind = ReadinessCheck::Kind::kDevices;
    check.glob = devices->glob;
    check.count = devices->count;
  } else if (log) {
    check.kind = ReadinessCheck::Kind::kKernelLog;
    check.pattern = log->pattern;
    check.seconds = log->seconds;
  } else if (stable) {
    check.kind = ReadinessCheck::Kind::kStable;
    check.path = stable->path;
    check.seconds = stable->seconds;
  }
}

void DecodePolicy(const YAML::Node& doc, int line, ReadContext& ctx, Decoded& out) {
  const size_t errors_before = ctx.errors.size();
  ctx.lines.clear();
  ModulePolicy p;
  YamlReader r(ctx, doc, "", /*warn_unknown=*/true);
  r.Ignore("apiVersion");
  r.Ignore("kind");
  r.Ignore("status");
  r.Object("metadata", p.metadata, ReadMeta);
  if (p.metadata.namespace_.empty()) {
    p.metadata.namespace_ = "default";
  }
  ctx.object = absl::StrCat("ModulePolicy ", p.metadata.namespace_, "/", p.metadata.name);
  CheckIdentity(doc, p.metadata, ctx);
  r.Object("spec", p, [&](YamlReader& s, ModulePolicy& mp) {
    s.String("moduleName", mp.module_name);
    s.Bool("paused", mp.paused);
    s.Object("rollout", mp.rollout, [&](YamlReader& ro, RolloutSpec& rs) {
      const YAML::Node& cdoc = doc;
      ReadAmount(ro, "maxParallel", rs.max_parallel, ctx, cdoc);
      ReadAmount(ro, "maxFailed", rs.max_failed, ctx, cdoc);
      ro.Object("canary", rs, [](YamlReader& c, RolloutSpec& cs) {
        c.Int64("count", cs.canary_count);
        c.StringMap("selector", cs.canary_selector);
        c.Bool("pause", cs.canary_pause);
        c.OptionalInt64("soakSeconds", cs.canary_soak_seconds);
      });
      std::string on_failure;
      ro.String("onFailure", on_failure);
      if (on_failure == "Leave") {
        rs.on_failure = OnFailure::kLeave;
      } else if (!on_failure.empty() && on_failure != "Rollback") {
        ctx.Error(doc, "spec.rollout.onFailure",
                  absl::StrCat(Quote(on_failure), ": expected Rollback (a Failed node goes back "
                               "to the driver it ran before) or Leave (it stays Failed for "
                               "inspection)"));
      }
    });
    s.OptionalObject("drain", mp.drain, [&](YamlReader& dr, DrainSpec& d) {
      dr.Bool("cordon", d.cordon);
      dr.StringList("resources", d.resources);
      dr.StringMap("podSelector", d.pod_selector);
      dr.Int64("timeoutSeconds", d.timeout_seconds);
      std::string on_timeout;
      dr.String("onTimeout", on_timeout);
      if (on_timeout == "Proceed") {
        d.on_timeout = OnDrainTimeout::kProceed;
      } else if (!on_timeout.empty() && on_timeout != "Fail") {
        ctx.Error(doc, "spec.drain.onTimeout",
                  absl::StrCat(Quote(on_timeout), ": expected Fail (the node keeps its driver "
                               "and counts as Failed) or Proceed (its driver is replaced anyway)"));
      }
    });
    s.Object("readiness", mp.readiness, [&](YamlReader& rd, std::vector<ReadinessCheck>& checks) {
      rd.ObjectList("checks", checks, [&](YamlReader& c, ReadinessCheck& check) {
        ReadCheck(c, check, ctx);
      });
    });
  });
  r.Finish();
  for (const FieldError& e : ValidateModulePolicy(p)) {
    ctx.Error(doc, e.path, e.message);
  }
  if (ctx.errors.size() == errors_before) {
    out.policies.push_back(Located<ModulePolicy>{std::move(p), ctx.source, line, std::move(ctx.lines)});
  }
}

struct TypeMeta {
  std::string api_version;
  std::string kind;
};

void DecodeObject(const YAML::Node& doc, const std::string& path, ReadContext& ctx,
                  Decoded& out);

void DecodeList(YamlReader& r, const YAML::Node& doc, const std::string& path,
                ReadContext& ctx, Decoded& out) {
  r.Ignore("metadata");
  const YAML::Node& cdoc = doc;
  YAML::Node items = cdoc["items"];
  r.Ignore("items");
  if (!items.IsDefined() || items.IsNull()) {
    return;
  }
  if (!items.IsSequence()) {
    ctx.Error(items, path.empty() ? "items" : path + ".items", "expected a list");
    return;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    DecodeObject(items[i], absl::StrCat(path.empty() ? "" : path + ".", "items[", i, "]"),
                 ctx, out);
  }
}

// `path` is empty for a top-level document and "items[i]" inside a List; Module field
// paths are always relative to the Module itself, as KMM's webhook reports them.
void DecodeObject(const YAML::Node& doc, const std::string& path, ReadContext& ctx,
                  Decoded& out) {
  if (!doc.IsDefined() || doc.IsNull()) {
    return;
  }
  ctx.object.clear();
  const int line = doc.Mark().line + 1;
  YamlReader top(ctx, doc, path, /*warn_unknown=*/false);
  if (!top.Ok()) {
    return;
  }
  TypeMeta tm;
  top.String("apiVersion", tm.api_version);
  top.String("kind", tm.kind);
  const std::string where = path.empty() ? "" : path + ".";
  if (tm.kind.empty()) {
    ctx.Error(doc, where + "kind",
              "missing; expected Module, Node, NodeModulesConfig or a List of them");
    return;
  }
  if (tm.kind == "List" || (tm.kind.size() > 4 && tm.kind.ends_with("List"))) {
    DecodeList(top, doc, path, ctx, out);
    return;
  }
  if (tm.kind == "Module") {
    if (tm.api_version != kGroupVersion) {
      ctx.Error(doc, where + "apiVersion",
                absl::StrCat("\"", tm.api_version, "\" is not supported for kind Module; use ",
                             kGroupVersion));
      return;
    }
    const size_t errors_before = ctx.errors.size();
    ctx.lines.clear();
    // The API server defaults, then checks the schema, then calls the webhook: the same
    // order here, so that a Module breaking the CRD's rules goes no further.
    YAML::Node defaulted = doc;  // a yaml-cpp handle: the document itself gets the defaults
    ApplyCrdDefaults(defaulted);
    Module m;
    YamlReader r(ctx, doc, "", /*warn_unknown=*/true);
    r.Ignore("apiVersion");
    r.Ignore("kind");
    r.Object("metadata", m.metadata, ReadMeta);
    if (m.metadata.namespace_.empty()) {
      m.metadata.namespace_ = "default";
    }
    ctx.object = absl::StrCat("Module ", m.metadata.namespace_, "/", m.metadata.name);
    CheckIdentity(doc, m.metadata, ctx);
    const size_t schema_errors_from = ctx.errors.size();  // the name's are not the schema's
    r.Object("spec", m.spec, ReadSpec);
    r.Object("status", m.status, ReadStatus);
    r.Finish();
    m.revision = SpecRevision(doc["spec"]);
    CheckCrdRules(doc, schema_errors_from, ctx);
    if (ctx.errors.size() == errors_before) {
      out.modules.push_back(Located<Module>{std::move(m), ctx.source, line, std::move(ctx.lines)});
    }
    return;
  }
  if (tm.kind == "NodeModulesConfig") {
    if (tm.api_version != kGroupVersion) {
      ctx.Error(doc, where + "apiVersion",
                absl::StrCat("\"", tm.api_version,
                             "\" is not supported for kind NodeModulesConfig; use ", kGroupVersion));
      return;
    }
    const size_t errors_before = ctx.errors.size();
    NodeModulesConfig c;
    YamlReader r(ctx, doc, "", /*warn_unknown=*/true);
    r.Ignore("apiVersion");
    r.Ignore("kind");
    r.Ignore("status");
    r.Object("metadata", c.metadata, ReadMeta);
    ctx.object = absl::StrCat("NodeModulesConfig ", c.metadata.name);
    r.Object("spec", c, [](YamlReader& s, NodeModulesConfig& nmc) {
      s.ObjectList("modules", nmc.modules, ReadNodeModule);
    });
    r.Finish();
    for (size_t i = 0; i < c.modules.size(); ++i) {
      if (c.modules[i].name.empty() || c.modules[i].namespace_.empty()) {
        ctx.Error(doc, absl::StrCat("spec.modules[", i, "]"),
                  "name and namespace are required");
      }
    }
    if (ctx.errors.size() == errors_before) {
      out.node_modules_configs.push_back(
          Located<NodeModulesConfig>{std::move(c), ctx.source, line, {}});
    }
    return;
  }
  if (tm.kind == "ModulePolicy") {
    if (tm.api_version != kKmoddGroupVersion) {
      ctx.Error(doc, where + "apiVersion",
                absl::StrCat("\"", tm.api_version,
                             "\" is not supported for kind ModulePolicy; use ", kKmoddGroupVersion));
      return;
    }
    DecodePolicy(doc, line, ctx, out);
    return;
  }
  if (tm.kind == "ConfigMap") {
    if (tm.api_version != "v1") {
      ctx.Error(doc, where + "apiVersion",
                absl::StrCat("\"", tm.api_version, "\" is not supported for kind ConfigMap; use v1"));
      return;
    }
    const size_t errors_before = ctx.errors.size();
    ConfigMap cm;
    YamlReader r(ctx, doc, "", /*warn_unknown=*/false);
    r.Object("metadata", cm.metadata, ReadMeta);
    if (cm.metadata.namespace_.empty()) {
      cm.metadata.namespace_ = "default";
    }
    ctx.object = absl::StrCat("ConfigMap ", cm.metadata.namespace_, "/", cm.metadata.name);
    if (cm.metadata.name.empty()) {
      ctx.Error(doc, "metadata.name", "missing; every ConfigMap needs a name");
    }
    r.StringMap("data", cm.data);
    if (ctx.errors.size() == errors_before) {
      out.config_maps.push_back(Located<ConfigMap>{std::move(cm), ctx.source, line, {}});
    }
    return;
  }
  if (tm.kind == "Node") {
    const size_t errors_before = ctx.errors.size();
    Node n;
    YamlReader r(ctx, doc, "", /*warn_unknown=*/false);
    r.Object("metadata", n.metadata, ReadMeta);
    ctx.object = absl::StrCat("Node ", n.metadata.name);
    if (n.metadata.name.empty()) {
      ctx.Error(doc, "metadata.name", "missing; every Node needs a name");
    }
    ReadNode(r, n);
    if (ctx.errors.size() == errors_before) {
      out.nodes.push_back(Located<Node>{std::move(n), ctx.source, line, {}});
    }
    return;
  }
  ctx.Warning(doc, where + "kind",
              absl::StrCat(tm.kind, " is not read by kmodd; document skipped"));
}

}  // namespace

void DecodeInto(std::string_view text, std::string_view source, Decoded& into) {
  ReadContext ctx;
  ctx.source = std::string(source);
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    into.errors.push_back(Diagnostic{ctx.source, e.mark.line >= 0 ? e.mark.line + 1 : 0, "",
                                     "", absl::StrCat("not valid YAML or JSON: ", e.msg)});
    return;
  }
  for (const auto& doc : docs) {
    try {
      DecodeObject(doc, "", ctx, into);
    } catch (const YAML::Exception& e) {
      ctx.Error(doc, "", absl::StrCat("cannot decode document: ", e.msg));
    }
  }
  for (auto& d : ctx.errors) {
    into.errors.push_back(std::move(d));
  }
  for (auto& d : ctx.warnings) {
    into.warnings.push_back(std::move(d));
  }
}

Decoded DecodeDocuments(std::string_view text, std::string_view source) {
  Decoded d;
  DecodeInto(text, source, d);
  return d;
}

absl::StatusOr<Module> DecodeModule(std::string_view text) {
  Decoded d = DecodeDocuments(text, "<input>");
  if (!d.errors.empty()) {
    std::vector<std::string> msgs;
    msgs.reserve(d.errors.size());
    for (const auto& e : d.errors) {
      msgs.push_back(e.ToString());
    }
    return absl::InvalidArgumentError(absl::StrJoin(msgs, "; "));
  }
  if (d.modules.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected exactly one Module, found ", d.modules.size()));
  }
  return std::move(d.modules.front().object);
}

}  // namespace kmodd::api

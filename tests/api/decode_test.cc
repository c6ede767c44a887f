#include <catch2/catch.hpp>

#include "common/file.h"
#include "api/decode.h"
#include "controller/kube_mode/kube_writer.h"
#include "controller/server/status.h"
#include "tests/source_dir.h"

using kmodd::api::Decoded;
using kmodd::api::DecodeDocuments;
using kmodd::api::DecodeModule;

namespace {

const char kFull[] = R"(
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata:
  name: gpu
  namespace: drivers
  labels: {team: gpu}
  generation: 4
spec:
  selector: {gpu: "true"}
  tolerations:
    - {key: maint, operator: Exists, effect: NoExecute, tolerationSeconds: 30}
  imageRepoSecret: {name: pull}
  imageRebuildTriggerGeneration: 2
  moduleLoader:
    serviceAccountName: loader
    container:
      version: "1.2"
      containerImage: reg/gpu:$KERNEL_FULL_VERSION
      imagePullPolicy: Always
      registryTLS: {insecure: true, insecureSkipTLSVerify: false}
      inTreeModulesToRemove: []
      build:
        buildArgs: [{name: A, value: b}]
        dockerfileConfigMap: {name: df}
        baseImageRegistryTLS: {insecureSkipTLSVerify: true}
        secrets: [{name: s1}]
        kanikoParams: {tag: v1.9}
        selector: {builder: "yes"}
      sign:
        unsignedImage: reg/unsigned:1
        keySecret: {name: key}
        certSecret: {name: cert}
        filesToSign: [/opt/lib/modules/6.1.0/gpu.ko]
      modprobe:
        moduleName: gpu
        parameters: [a=1]
        dirName: /opt
        args: {load: [-v], unload: [-v]}
        firmwarePath: /firmware
        modulesLoadingOrder: [gpu, gpu_helper]
      kernelMappings:
        - regexp: '^6\.'
          containerImage: ""
          registryTLS: {insecureSkipTLSVerify: true}
          inTreeModuleToRemove: old_gpu
        - literal: 5.14.0
          containerImage: reg/gpu-el9:1
          inTreeModulesToRemove: [i915]
  devicePlugin:
    serviceAccountName: dp
    automountServiceAccountToken: false
    container:
      image: reg/plugin:1
      args: [--x]
      env: [{name: A, value: "1"}, {name: B, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]
      volumeMounts: [{name: dev, mountPath: /dev, readOnly: true, subPathExpr: $(NODE), recursiveReadOnly: Enabled}]
      resources: {limits: {cpu: 100m}}
      securityContext: {capabilities: {drop: [ALL]}, readOnlyRootFilesystem: true}
      startupProbe: {exec: {command: [test, -S, /var/lib/kubelet/device-plugins/gpu.sock]}, failureThreshold: 60}
      livenessProbe: {grpc: {port: 51515}}
    volumes:
      - {name: dev, hostPath: {path: /dev, type: Directory}}
      - {name: cfg, configMap: {name: plugin-config}}
status:
  moduleLoader: {nodesMatchingSelectorNumber: 3, desiredNumber: 2, availableNumber: 1}
  devicePlugin: {desiredNumber: 2}
)";

// The DRA driver, which may not share a Module with a device plugin.
const char kDra[] = R"(
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: gpu-dra, namespace: drivers}
spec:
  selector: {gpu: "true"}
  dra:
    driverName: gpu.example.com
    container: {image: reg/dra:1}
    deviceClasses:
      - name: gpu.example.com
        selectors: [{cel: {expression: "true"}}]
        config: [{opaque: {driver: gpu.example.com, parameters: {sharing: time-sliced}}}]
)";

std::string Messages(const std::vector<kmodd::api::Diagnostic>& ds) {
  std::string out;
  for (const auto& d : ds) {
    out += d.ToString() + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("decoder reads every spec and status field of a KMM v1beta1 Module") {
  auto d = DecodeDocuments(kFull, "full.yaml");
  INFO(Messages(d.errors) << Messages(d.warnings));
  REQUIRE(d.errors.empty());
  CHECK(d.warnings.empty());
  REQUIRE(d.modules.size() == 1);
  const auto& m = d.modules[0].object;
  CHECK(m.Key() == "drivers/gpu");
  CHECK(m.metadata.generation == 4);
  CHECK(m.spec.selector.at("gpu") == "true");
  REQUIRE(m.spec.tolerations.size() == 1);
  CHECK(m.spec.tolerations[0].toleration_seconds == 30);
  CHECK(m.spec.image_repo_secret->name == "pull");
  CHECK(m.spec.image_rebuild_trigger_generation == 2);
  const auto& l = *m.spec.module_loader;
  CHECK(l.service_account_name == "loader");
  const auto& c = l.container;
  CHECK(c.version == "1.2");
  CHECK(c.image_pull_policy == "Always");
  CHECK(c.registry_tls.insecure);
  // An explicit empty list is present (KMM's non-nil empty slice), not absent.
  REQUIRE(c.in_tree_modules_to_remove.has_value());
  CHECK(c.in_tree_modules_to_remove->empty());
  REQUIRE(c.build.has_value());
  CHECK(c.build->build_args[0].value == "b");
  CHECK(c.build->dockerfile_config_map->name == "df");
  CHECK(c.build->base_image_registry_tls.insecure_skip_tls_verify);
  CHECK(c.build->kaniko_params->tag == "v1.9");
  CHECK(c.build->selector.at("builder") == "yes");
  CHECK(c.sign->files_to_sign.size() == 1);
  CHECK(c.sign->cert_secret->name == "cert");
  CHECK(c.modprobe.args->load == std::vector<std::string>{"-v"});
  CHECK_FALSE(c.modprobe.raw_args.has_value());
  CHECK(c.modprobe.firmware_path == "/firmware");
  CHECK(c.modprobe.modules_loading_order->size() == 2);
  REQUIRE(c.kernel_mappings.size() == 2);
  CHECK(c.kernel_mappings[0].registry_tls->insecure_skip_tls_verify);
  CHECK(c.kernel_mappings[0].in_tree_module_to_remove == "old_gpu");
  CHECK_FALSE(c.kernel_mappings[0].in_tree_modules_to_remove.has_value());
  CHECK_FALSE(c.kernel_mappings[1].registry_tls.has_value());
  const auto& dp = *m.spec.device_plugin;
  CHECK(dp.automount_service_account_token == false);
  CHECK(dp.container.env[1].value_from.json.find("spec.nodeName") != std::string::npos);
  CHECK(dp.container.volume_mounts[0].read_only);
  CHECK(dp.container.volume_mounts[0].sub_path_expr == "$(NODE)");
  CHECK(dp.container.volume_mounts[0].recursive_read_only == "Enabled");
  CHECK(dp.container.security_context.json.find("readOnlyRootFilesystem") != std::string::npos);
  CHECK(dp.container.startup_probe.json.find("failureThreshold") != std::string::npos);
  CHECK(dp.container.liveness_probe.json.find("51515") != std::string::npos);
  CHECK_FALSE(m.spec.dra.has_value());
  CHECK(dp.container.resources.Present());
  CHECK(dp.volumes[0].host_path->path == "/dev");
  CHECK(dp.volumes[1].other_sources.json == R"({"configMap":{
  "name": "plugin-config"
}})");
  CHECK(m.status.module_loader.nodes_matching_selector_number == 3);
  CHECK(m.status.module_loader.available_number == 1);
  CHECK(m.status.device_plugin.desired_number == 2);

  auto dra = DecodeDocuments(kDra, "dra.yaml");
  INFO(Messages(dra.errors) << Messages(dra.warnings));
  REQUIRE(dra.modules.size() == 1);
  CHECK(dra.warnings.empty());
  const auto& driver = *dra.modules[0].object.spec.dra;
  CHECK(driver.driver_name == "gpu.example.com");
  CHECK(driver.device_classes[0].selectors.json.find("\"expression\": \"true\"") !=
        std::string::npos);
  CHECK(driver.device_classes[0].config.json.find("time-sliced") != std::string::npos);
}

TEST_CASE("decoder reads JSON as well as YAML") {
  auto m = DecodeModule(R"({"apiVersion": "kmm.sigs.x-k8s.io/v1beta1", "kind": "Module",
    "metadata": {"name": "j"},
    "spec": {"selector": {}, "moduleLoader": {"container": {"modprobe": {"moduleName": "j"},
      "kernelMappings": [{"literal": "6.1.0", "containerImage": "r/j:1"}]}}}})");
  REQUIRE(m.ok());
  // No namespace in the document means "default", as kubectl does.
  CHECK(m->Key() == "default/j");
  CHECK(m->spec.module_loader->container.kernel_mappings[0].literal == "6.1.0");
}

TEST_CASE("decoder reads multi-document streams and v1 Lists of Modules and Nodes") {
  auto d = DecodeDocuments(R"(
---
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: a}
---
---
apiVersion: v1
kind: List
items:
  - {apiVersion: kmm.sigs.x-k8s.io/v1beta1, kind: Module, metadata: {name: b, namespace: x}}
  - apiVersion: v1
    kind: Node
    metadata: {name: n1, labels: {role: gpu}, resourceVersion: "12"}
    spec: {unschedulable: true, taints: [{key: k, effect: NoExecute}], podCIDR: 10.0.0.0/24}
    status:
      nodeInfo: {kernelVersion: 6.1.0-27-cloud-amd64, bootID: b-1, architecture: amd64}
      capacity: {cpu: "4"}
  - apiVersion: v1
    kind: Secret
    metadata: {name: skipped}
)", "s.yaml");
  INFO(Messages(d.errors));
  REQUIRE(d.errors.empty());
  REQUIRE(d.modules.size() == 2);
  CHECK(d.modules[0].object.Key() == "default/a");
  CHECK(d.modules[1].object.Key() == "x/b");
  REQUIRE(d.nodes.size() == 1);
  const auto& n = d.nodes[0].object;
  CHECK(n.unschedulable);
  CHECK(n.taints[0].effect == "NoExecute");
  CHECK(n.node_info.kernel_version == "6.1.0-27-cloud-amd64");
  CHECK(n.node_info.boot_id == "b-1");
  // Node fields kmodd does not read are not warned about; other kinds are skipped with one.
  REQUIRE(d.warnings.size() == 1);
  CHECK(d.warnings[0].path == "items[2].kind");
  CHECK(d.warnings[0].message.find("Secret") != std::string::npos);
}

TEST_CASE("ConfigMaps (a Module's build Dockerfile in standalone mode) are read, or refused naming the field") {
  Decoded d = DecodeDocuments(R"(
apiVersion: v1
kind: ConfigMap
metadata: {name: dockerfile, namespace: ns}
data:
  dockerfile: |
    FROM scratch
---
apiVersion: v1
kind: ConfigMap
metadata: {name: no-namespace}
)", "c.yaml");
  INFO(Messages(d.errors));
  REQUIRE(d.errors.empty());
  CHECK(d.warnings.empty());
  REQUIRE(d.config_maps.size() == 2);
  CHECK(d.config_maps[0].object.metadata.namespace_ == "ns");
  CHECK(d.config_maps[0].object.data.at("dockerfile") == "FROM scratch\n");
  CHECK(d.config_maps[1].object.metadata.namespace_ == "default");
  Decoded bad = DecodeDocuments(R"(
apiVersion: v2
kind: ConfigMap
metadata: {name: a}
---
apiVersion: v1
kind: ConfigMap
metadata: {}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: b}
data: {dockerfile: [not, a, string]}
)", "bad.yaml");
  CHECK(bad.config_maps.empty());
  const std::string messages = Messages(bad.errors);
  CHECK_THAT(messages, Catch::Contains("\"v2\" is not supported for kind ConfigMap; use v1"));
  CHECK_THAT(messages, Catch::Contains("metadata.name: missing; every ConfigMap needs a name"));
  CHECK_THAT(messages, Catch::Contains("ConfigMap default/b: data[\"dockerfile\"]: expected a string, got a list"));
}

TEST_CASE("a type error names the field path and what was expected") {
  struct Row {
    const char* spec;
    const char* path;
    const char* message;
  };
  const Row rows[] = {
      {"moduleLoader: {container: {kernelMappings: [{}, {}, {regexp: [a]}]}}",
       "spec.moduleLoader.container.kernelMappings[2].regexp", "expected a string, got a list"},
      {"moduleLoader: {container: {version: 1.0}}", "spec.moduleLoader.container.version",
       "expected a string, got a number (quote it: \"1.0\")"},
      {"moduleLoader: {container: {registryTLS: {insecure: maybe}}}",
       "spec.moduleLoader.container.registryTLS.insecure", "expected a boolean"},
      {"imageRebuildTriggerGeneration: two", "spec.imageRebuildTriggerGeneration",
       "expected an integer"},
      {"selector: [a]", "spec.selector", "expected a mapping of strings"},
      {"selector: {gpu: true}", "spec.selector[\"gpu\"]", "expected a string, got a boolean"},
      {"tolerations: {key: a}", "spec.tolerations", "expected a list"},
      {"moduleLoader: {container: {modprobe: [x]}}", "spec.moduleLoader.container.modprobe",
       "expected a mapping, got a list"},
      {"moduleLoader: {container: {modprobe: {parameters: [a=1, 2]}}}",
       "spec.moduleLoader.container.modprobe.parameters[1]", "expected a string, got a number"},
  };
  for (const auto& r : rows) {
    INFO(r.spec);
    auto d = DecodeDocuments(std::string("apiVersion: kmm.sigs.x-k8s.io/v1beta1\nkind: Module\n"
                                         "metadata: {name: t, namespace: ns}\nspec:\n  ") +
                                 r.spec + "\n",
                             "t.yaml");
    // The rows leave out required fields too: those errors come with the type error.
    std::vector<kmodd::api::Diagnostic> at_path;
    for (const auto& e : d.errors) {
      if (e.path == r.path) {
        at_path.push_back(e);
      }
    }
    REQUIRE(at_path.size() == 1);
    CHECK(at_path[0].object == "Module ns/t");
    CHECK(at_path[0].message.find(r.message) != std::string::npos);
    CHECK(d.modules.empty());
  }
}

TEST_CASE("an unknown field is a warning naming its path, and the Module still decodes") {
  auto d = DecodeDocuments(R"(apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: t}
spec:
  selector: {}
  moduleLoader:
    container:
      modprobe: {moduleName: t, firmwarepath: /fw}
      kernelMappings: [{regexp: x, containerImage: r/x:1}]
  nodeSelector: {a: b}
)", "w.yaml");
  INFO(Messages(d.errors));
  REQUIRE(d.errors.empty());
  REQUIRE(d.modules.size() == 1);
  REQUIRE(d.warnings.size() == 2);
  CHECK(d.warnings[0].path == "spec.moduleLoader.container.modprobe.firmwarepath");
  CHECK(d.warnings[0].line == 8);
  CHECK(d.warnings[1].path == "spec.nodeSelector");
}

TEST_CASE("null and empty values read as absent, as Go's JSON decoding treats them") {
  auto m = DecodeModule(R"(apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: t}
spec:
  selector: {}
  tolerations:
  imageRepoSecret: null
  moduleLoader:
    container:
      inTreeModulesToRemove: ~
      modprobe: {moduleName: t, dirName: }
      kernelMappings: [{regexp: x, containerImage: r/x:1}]
)");
  INFO(m.status());
  REQUIRE(m.ok());
  CHECK(m->spec.tolerations.empty());
  CHECK_FALSE(m->spec.image_repo_secret.has_value());
  CHECK_FALSE(m->spec.module_loader->container.in_tree_modules_to_remove.has_value());
  CHECK(m->spec.module_loader->container.modprobe.EffectiveDirName() == "/opt");
}

TEST_CASE("documents that cannot be Modules are errors naming what to fix") {
  struct Row {
    const char* text;
    const char* path;
    const char* message;
  };
  const Row rows[] = {
      {"apiVersion: kmm.sigs.x-k8s.io/v1alpha1\nkind: Module\nmetadata: {name: a}\n", "apiVersion",
       "use kmm.sigs.x-k8s.io/v1beta1"},
      {"apiVersion: kmm.sigs.x-k8s.io/v1beta1\nkind: Module\nmetadata: {namespace: a}\n",
       "metadata.name", "missing"},
      {"apiVersion: v1\nmetadata: {name: a}\n", "kind", "missing"},
      {"- just\n- a list\n", "", "expected a mapping"},
      {"apiVersion: v1\nkind: List\nitems: {a: b}\n", "items", "expected a list"},
  };
  for (const auto& r : rows) {
    INFO(r.text);
    auto d = DecodeDocuments(r.text, "bad.yaml");
    REQUIRE(d.errors.size() == 1);
    CHECK(d.errors[0].path == r.path);
    CHECK(d.errors[0].message.find(r.message) != std::string::npos);
  }
}

TEST_CASE("text that is not YAML is one error with its line") {
  auto d = DecodeDocuments("a: [1, 2\nb: c\n", "broken.yaml");
  REQUIRE(d.errors.size() == 1);
  CHECK(d.errors[0].source == "broken.yaml");
  CHECK(d.errors[0].line > 0);
  CHECK(d.errors[0].message.find("not valid YAML or JSON") != std::string::npos);
}

TEST_CASE("DecodeModule insists on exactly one Module") {
  CHECK_FALSE(DecodeModule("").ok());
  CHECK_FALSE(DecodeModule(R"(apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: a}
---
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: b}
)").ok());
}

TEST_CASE("the planner's NodeModulesConfig output decodes back, as the agent reads it") {
  auto text = kmodd::ReadFile(std::string(KMODD_SOURCE_DIR) + "/tests/cli/golden/examples-plan.yaml");
  REQUIRE(text.ok());
  auto d = DecodeDocuments(*text, "examples-plan.yaml");
  INFO(Messages(d.errors) << Messages(d.warnings));
  REQUIRE(d.errors.empty());
  CHECK(d.warnings.empty());
  REQUIRE(d.node_modules_configs.size() == 5);
  const auto& gpu = d.node_modules_configs[0].object;
  CHECK(gpu.metadata.name == "gpu-1");
  REQUIRE(gpu.modules.size() == 1);
  const auto& m = gpu.modules[0];
  CHECK(m.Key() == "intel-gpu/gpu-xe");
  CHECK(m.image_repo_secret->name == "intel-registry");
  CHECK(m.config.kernel_version == "6.12.9");
  CHECK(m.config.insecure_pull);
  CHECK(m.config.in_tree_modules_to_remove == std::vector<std::string>{"xe", "i915"});
  CHECK(m.config.modprobe.module_name == "xe");
  CHECK(m.config.modprobe.firmware_path == "/firmware");
  CHECK(m.config.modprobe.modules_loading_order->size() == 3);
}

TEST_CASE("a Module read back with the status kmodd writes decodes without a warning") {
  kmodd::server::ModuleState state;
  state.namespace_ = "drivers";
  state.name = "gpu";
  state.module_loader = {3, 2, 1};
  state.conditions = {{"Available", "False", "NodesNotLoaded", "1 of 2 nodes have it loaded"},
                      {"Degraded", "True", "LoadFailed", "worker-2: insmod: Invalid argument"}};
  state.nodes = {{"worker-1", kmodd::api::Phase::kLoaded, "", "sha256:00", 1764556801000, true},
                 {"worker-2", kmodd::api::Phase::kFailed, "insmod: Invalid argument", "", 0, false}};
  // As `kubectl get module -o yaml` shows it: the spec and the status the controller wrote.
  const std::string text = std::string(kFull).substr(0, std::string(kFull).find("status:")) +
                           kmodd::ToYaml(kmodd::Value(kmodd::Value::Map{
                               {"status", kmodd::server::ModuleStatusValue(state)}}));
  auto d = DecodeDocuments(text, "get.yaml");
  INFO(text << Messages(d.errors) << Messages(d.warnings));
  CHECK(d.errors.empty());
  CHECK(d.warnings.empty());
  REQUIRE(d.modules.size() == 1);
  CHECK(d.modules[0].object.status.module_loader.available_number == 1);
}

TEST_CASE("dirName defaults to /opt as the CRD's default does; an explicit empty one is the image root") {
  auto with = [](const std::string& modprobe) {
    return "apiVersion: kmm.sigs.x-k8s.io/v1beta1\nkind: Module\nmetadata: {name: t}\n"
           "spec:\n  selector: {}\n  moduleLoader:\n    container:\n      modprobe: " +
           modprobe + "\n      kernelMappings: [{regexp: x, containerImage: r/x:1}]\n";
  };
  struct Row {
    const char* modprobe;
    const char* dir_name;
  };
  for (const Row& row : {Row{"{moduleName: t}", "/opt"}, Row{"{moduleName: t, dirName: ~}", "/opt"},
                         Row{"{moduleName: t, dirName: /drivers}", "/drivers"},
                         // KMM's worker joins an empty dirName onto the image's root.
                         Row{"{moduleName: t, dirName: ''}", "/"}}) {
    DYNAMIC_SECTION(row.modprobe) {
      auto m = DecodeModule(with(row.modprobe));
      REQUIRE(m.status().ToString() == "OK");
      CHECK(m->spec.module_loader->container.modprobe.dir_name == row.dir_name);
    }
  }
}

TEST_CASE("a name or namespace the API server would refuse is an error naming it") {
  struct Row {
    const char* meta;
    const char* path;
  };
  for (const Row& row : {Row{"{name: GPU}", "metadata.name"}, Row{"{name: gpu_1}", "metadata.name"},
                         Row{"{name: -gpu}", "metadata.name"},
                         Row{"{name: gpu, namespace: Drivers}", "metadata.namespace"},
                         Row{"{name: gpu, namespace: a.b}", "metadata.namespace"},
                         Row{"{name: gpu.example-1, namespace: kmm-demo}", ""}}) {
    DYNAMIC_SECTION(row.meta) {
      auto d = DecodeDocuments(std::string("apiVersion: kmm.sigs.x-k8s.io/v1beta1\nkind: Module\n"
                                           "metadata: ") + row.meta + "\nspec: {selector: {}}\n",
                               "m.yaml");
      INFO(Messages(d.errors));
      if (*row.path == '\0') {
        CHECK(d.errors.empty());
      } else {
        REQUIRE(d.errors.size() == 1);
        CHECK(d.errors[0].path == row.path);
        CHECK_THAT(d.errors[0].message, Catch::Contains("lowercase"));
      }
    }
  }
}

#include <catch2/catch.hpp>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "api/decode.h"
#include "api/validate.h"

using kmodd::api::DecodeModule;
using kmodd::api::FieldError;
using kmodd::api::IsValidKernelModuleName;
using kmodd::api::Module;
using kmodd::api::ValidateModule;
using kmodd::api::ValidateModuleUpdate;

namespace Catch {
template <>
struct StringMaker<FieldError> {
  static std::string convert(const FieldError& e) { return e.path + ": " + e.message; }
};
}  // namespace Catch

namespace {

constexpr char kHeader[] = R"(apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: m, namespace: ns}
)";

constexpr char kDigest[] =
    "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

// A row is a Module's spec and the one error it must produce; no path means valid.
struct Row {
  std::string description;
  std::string spec;
  std::string path;
  std::string message;
};

Module Decode(const std::string& yaml) {
  auto m = DecodeModule(yaml);
  INFO(yaml);
  REQUIRE(m.status().ToString() == "OK");
  return *m;
}

void Check(const std::vector<FieldError>& errors, const Row& row) {
  CAPTURE(errors);
  if (row.path.empty()) {
    CHECK(errors.empty());
    return;
  }
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].path == row.path);
  CHECK_THAT(errors[0].message, Catch::Contains(row.message));
}

void CheckRows(const std::vector<Row>& rows) {
  for (const Row& row : rows) {
    DYNAMIC_SECTION(row.description) { Check(ValidateModule(Decode(kHeader + row.spec)), row); }
  }
}

// The spec of a Module with a valid module loader container; a row changes one part of it.
// It converts to the spec text so that table rows read as the YAML they stand for.
class Loader {
 public:
  Loader& Modprobe(std::string fields) {
    modprobe_ = std::move(fields);
    return *this;
  }
  Loader& Mappings(std::string list) {
    mappings_ = std::move(list);
    return *this;
  }
  // More container fields, in YAML flow style.
  Loader& With(std::string fields) {
    extra_ = ", " + std::move(fields);
    return *this;
  }
  operator std::string() const {  // NOLINT(google-explicit-constructor): see above
    return "spec:\n  selector: {}\n  moduleLoader:\n    container: {modprobe: {" + modprobe_ +
           "}, kernelMappings: " + mappings_ + extra_ + "}\n";
  }

 private:
  std::string modprobe_ = "moduleName: mymod";
  std::string mappings_ = "[{regexp: '^.+$', containerImage: 'reg/x:v1'}]";
  std::string extra_;
};

}  // namespace

TEST_CASE("validation accepts a minimal Module") {
  CheckRows({
      {"with a module loader", Loader(), "", ""},
      {"without a module loader", "spec: {selector: {gpu: 'true'}}\n", "", ""},
  });
}

TEST_CASE("validation limits name plus namespace to the 41 characters of a node-label key") {
  const std::string ns(20, 'n');
  for (auto [name_length, valid] : {std::pair{21, true}, std::pair{22, false}}) {
    DYNAMIC_SECTION("name of " << name_length << " characters") {
      const std::string yaml =
          "apiVersion: kmm.sigs.x-k8s.io/v1beta1\nkind: Module\nmetadata: {name: " +
          std::string(name_length, 'a') + ", namespace: " + ns + "}\n";
      Check(ValidateModule(Decode(yaml)),
            valid ? Row{} : Row{"", "", "metadata.name", "are 42 characters; at most 41"});
    }
  }
}

TEST_CASE("validation checks tolerations as the Kubernetes API does") {
  auto tol = [](const std::string& t) {
    return "spec:\n  selector: {}\n  tolerations:\n  - " + t + "\n";
  };
  CheckRows({
      {"key, Equal, value and effect",
       tol("{key: example.com/gpu, operator: Equal, value: 'true', effect: NoSchedule}"), "", ""},
      {"empty key with Exists", tol("{operator: Exists}"), "", ""},
      {"tolerationSeconds with NoExecute", tol("{key: k, effect: NoExecute, tolerationSeconds: 5}"),
       "", ""},
      {"key with a space", tol("{key: 'bad key'}"), "spec.tolerations[0].key", "not a valid key"},
      {"key with an uppercase prefix", tol("{key: Example.com/gpu}"), "spec.tolerations[0].key",
       "the prefix \"Example.com\" must be a DNS subdomain"},
      {"key with two slashes", tol("{key: a/b/c}"), "spec.tolerations[0].key", "more than one '/'"},
      {"key name of 64 characters", tol("{key: " + std::string(64, 'k') + "}"),
       "spec.tolerations[0].key", "at most 63"},
      {"empty key with Equal", tol("{operator: Equal}"), "spec.tolerations[0].operator",
       "must be Exists when key is empty"},
      {"unknown operator", tol("{key: k, operator: In}"), "spec.tolerations[0].operator",
       "use Equal or Exists"},
      {"value with Exists", tol("{key: k, operator: Exists, value: v}"),
       "spec.tolerations[0].value", "must be empty when operator is Exists"},
      {"value that is no label value", tol("{key: k, value: 'a b'}"), "spec.tolerations[0].value",
       "is not a label value"},
      {"unknown effect", tol("{key: k, effect: NoRun}"), "spec.tolerations[0].effect",
       "use NoSchedule, PreferNoSchedule or NoExecute"},
      {"tolerationSeconds with NoSchedule",
       tol("{key: k, effect: NoSchedule, tolerationSeconds: 5}"),
       "spec.tolerations[0].tolerationSeconds", "set effect: NoExecute"},
      {"the second toleration wrong", tol("{key: k}\n  - {key: k, operator: In}"),
       "spec.tolerations[1].operator", "\"In\" is not an operator"},
  });
}

TEST_CASE("validation checks the DRA driver and device class names") {
  // A driver or class name that is absent, or a class name that the CRD's pattern refuses,
  // stops at decoding (tests/api/data/crd_cases.yaml).
  auto dra = [](const std::string& fields) {
    return "spec:\n  selector: {}\n  dra: {container: {image: 'r/dra:1'}, " + fields + "}\n";
  };
  CheckRows({
      {"driver and two classes",
       dra("driverName: gpu.example.com, deviceClasses: [{name: a.example.com}, {name: b}]"), "",
       ""},
      {"an empty driver name", dra("driverName: '', deviceClasses: [{name: a}]"),
       "spec.dra.driverName", "missing"},
      {"driver name with capitals", dra("driverName: GPU_Driver"), "spec.dra.driverName",
       "is not valid; use a DNS subdomain (lowercase"},
      {"class name longer than 253", dra("driverName: d, deviceClasses: [{name: " +
                                         std::string(254, 'a') + "}]"),
       "spec.dra.deviceClasses[0].name", "use a DNS subdomain"},
      {"duplicate class", dra("driverName: d, deviceClasses: [{name: a}, {name: a}]"),
       "spec.dra.deviceClasses[1].name", "duplicates deviceClasses[0].name"},
  });
}

TEST_CASE("validation lets plugins mount host paths under /dev, /sys, /var, /opt, /run and /etc/cdi only") {
  auto dra = [](const std::string& path) {
    return "spec:\n  selector: {}\n  dra: {driverName: d, container: {image: 'r/dra:1'}, "
           "volumes: [{name: v, hostPath: {path: '" +
           path + "'}}]}\n";
  };
  auto dp = [](const std::string& path) {
    return "spec:\n  selector: {}\n  devicePlugin: {container: {image: 'r/dp:1'}, volumes: "
           "[{name: v, hostPath: {path: '" +
           path + "'}}]}\n";
  };
  CheckRows({
      {"/dev/dri", dp("/dev/dri"), "", ""},
      {"/run itself", dp("/run"), "", ""},
      {"a path that cleans to /var/lib", dp("/opt/../var//lib/"), "", ""},
      {"/sys for DRA", dra("/sys/class"), "", ""},
      {"/etc/cdi for DRA (CDI specs; KMM refuses it)", dra("/etc/cdi"), "", ""},
      {"/etc/cdi for a device plugin", dp("/etc/cdi/"), "", ""},
      {"/etc", dp("/etc"), "spec.devicePlugin.volumes[0].hostPath.path",
       "only /dev, /sys, /var, /opt, /run, /etc/cdi or paths under them are permitted"},
      {"a sibling of /etc/cdi", dra("/etc/cdi2"), "spec.dra.volumes[0].hostPath.path",
       "\"/etc/cdi2\" is not allowed"},
      {"an escape from /etc/cdi", dra("/etc/cdi/../passwd"), "spec.dra.volumes[0].hostPath.path",
       "is not allowed"},
      {"a sibling of /dev", dp("/devices"), "spec.devicePlugin.volumes[0].hostPath.path",
       "\"/devices\" is not allowed"},
      {"an escape from /dev", dp("/dev/../etc"), "spec.devicePlugin.volumes[0].hostPath.path",
       "is not allowed"},
      {"/root for DRA", dra("/root"), "spec.dra.volumes[0].hostPath.path", "/run"},
  });
}

TEST_CASE("validation refuses probes on plugin init containers, as KMM's webhook does") {
  auto dp = [](const std::string& init) {
    return "spec:\n  selector: {}\n  devicePlugin: {container: {image: 'r/dp:1', livenessProbe: "
           "{exec: {command: [true]}}, startupProbe: {tcpSocket: {port: 1}}, securityContext: "
           "{privileged: false}}, initContainer: {image: 'r/init:1', " +
           init + "}}\n";
  };
  auto dra = [](const std::string& init) {
    return "spec:\n  selector: {}\n  dra: {driverName: d, container: {image: 'r/dra:1'}, "
           "initContainer: {image: 'r/init:1', " +
           init + "}}\n";
  };
  CheckRows({
      {"probes on the container, a securityContext on both", dp("securityContext: {}"), "", ""},
      {"a liveness probe on the init container", dp("livenessProbe: {exec: {command: [x]}}"),
       "spec.devicePlugin.initContainer.livenessProbe", "probes are not allowed on an init container"},
      {"a startup probe on DRA's init container", dra("startupProbe: {grpc: {port: 5}}"),
       "spec.dra.initContainer.startupProbe", "put it on the container"},
  });
}

TEST_CASE("validation requires container images to pin a tag or digest") {
  auto image = [](const std::string& i) {
    return Loader().Mappings("[{literal: 6.1.0, containerImage: '" + i + "'}]");
  };
  const std::string mapping = "spec.moduleLoader.container.kernelMappings[0].containerImage";
  CheckRows({
      {"a tag", image("reg.example/x:v1"), "", ""},
      {"a tag after a registry port", image("registry:5000/repo:$KERNEL_FULL_VERSION"), "", ""},
      {"a digest", image(std::string("reg/x@") + kDigest), "", ""},
      {"a tag and a digest", image(std::string("reg/x:v1@") + kDigest), "", ""},
      {"only a registry port", image("registry:5000/repo"), mapping, "has no tag or digest"},
      {"an empty tag", image("reg/x:"), mapping, "add a tag (e.g. :$KERNEL_FULL_VERSION)"},
      {"a short digest", image("reg/x@sha256:abc"), mapping, "has a malformed digest"},
      {"a container image without a tag", Loader().With("containerImage: reg/x"),
       "spec.moduleLoader.container.containerImage", "has no tag or digest"},
  });
}

TEST_CASE("validation checks that each kernel mapping selects kernels and an image") {
  const std::string base = "spec.moduleLoader.container.kernelMappings";
  CheckRows({
      {"a literal", Loader().Mappings("[{literal: 6.1.0, containerImage: 'r/x:1'}]"), "", ""},
      {"the container's image",
       Loader().Mappings("[{literal: 6.1.0, containerImage: ''}]").With("containerImage: 'r/x:1'"),
       "", ""},
      {"regexp and literal",
       Loader().Mappings("[{regexp: '^6', literal: 6.1.0, containerImage: 'r/x:1'}]"), base + "[0]",
       "sets both regexp and literal; set exactly one"},
      {"neither regexp nor literal", Loader().Mappings("[{containerImage: 'r/x:1'}]"), base + "[0]",
       "sets neither regexp nor literal"},
      {"a regexp RE2 cannot compile",
       Loader().Mappings("[{literal: a, containerImage: 'r/x:1'}, {literal: b, containerImage: "
                         "'r/x:1'}, {regexp: '^6.(1', containerImage: 'r/x:1'}]"),
       base + "[2].regexp", "is not a valid regular expression: missing )"},
      {"no image anywhere", Loader().Mappings("[{literal: 6.1.0, containerImage: ''}]"),
       base + "[0].containerImage",
       "set kernelMappings[0].containerImage or spec.moduleLoader.container.containerImage"},
  });
}

TEST_CASE("validation refuses mixing the list and single forms of in-tree module removal") {
  const std::string container = "spec.moduleLoader.container";
  auto mapping = [](const std::string& fields) {
    return "[{regexp: '^.+$', containerImage: 'r/x:1', " + fields + "}]";
  };
  CheckRows({
      {"lists in both places",
       Loader().Mappings(mapping("inTreeModulesToRemove: [b]")).With("inTreeModulesToRemove: [a]"),
       "", ""},
      {"single names in both places",
       Loader().Mappings(mapping("inTreeModuleToRemove: b")).With("inTreeModuleToRemove: a"), "",
       ""},
      {"both forms in the container",
       Loader().With("inTreeModuleToRemove: a, inTreeModulesToRemove: []"),
       container + ".inTreeModuleToRemove", "cannot be set together with inTreeModulesToRemove"},
      {"both forms in a mapping",
       Loader().Mappings(mapping("inTreeModuleToRemove: a, inTreeModulesToRemove: [b]")),
       container + ".kernelMappings[0].inTreeModuleToRemove", "cannot be set together"},
      {"a mapping list with a container single",
       Loader().Mappings(mapping("inTreeModulesToRemove: [b]")).With("inTreeModuleToRemove: a"),
       container + ".kernelMappings[0].inTreeModulesToRemove",
       "cannot be combined with spec.moduleLoader.container.inTreeModuleToRemove"},
      {"a mapping single with a container list",
       Loader().Mappings(mapping("inTreeModuleToRemove: b")).With("inTreeModulesToRemove: [a]"),
       container + ".kernelMappings[0].inTreeModuleToRemove",
       "cannot be combined with spec.moduleLoader.container.inTreeModulesToRemove"},
  });
}

TEST_CASE("validation requires either moduleName or both raw modprobe argument lists") {
  const std::string modprobe = "spec.moduleLoader.container.modprobe";
  CheckRows({
      {"raw load and unload", Loader().Modprobe("rawArgs: {load: [a], unload: [b]}"), "", ""},
      {"moduleName and raw load", Loader().Modprobe("moduleName: m, rawArgs: {load: [a]}"),
       modprobe + ".rawArgs.load", "must be empty when moduleName is set"},
      {"moduleName and raw unload", Loader().Modprobe("moduleName: m, rawArgs: {unload: [a]}"),
       modprobe + ".rawArgs.unload", "must be empty when moduleName is set"},
      {"neither", Loader().Modprobe("rawArgs: {}"), modprobe + ".moduleName",
       "missing; set moduleName, or both rawArgs.load and rawArgs.unload"},
      {"raw load alone", Loader().Modprobe("rawArgs: {load: [a]}"), modprobe + ".rawArgs.unload",
       "required when rawArgs.load is set"},
  });
}

TEST_CASE("validation requires a loading order to start with moduleName and list each once") {
  const std::string order = "spec.moduleLoader.container.modprobe.modulesLoadingOrder";
  auto with = [](const std::string& modprobe) { return Loader().Modprobe(modprobe); };
  CheckRows({
      {"moduleName then a dependency", with("moduleName: a, modulesLoadingOrder: [a, b]"), "", ""},
      {"one entry", with("moduleName: a, modulesLoadingOrder: [a]"), order, "at least 2 modules"},
      {"no moduleName", with("rawArgs: {load: [x], unload: [z]}, modulesLoadingOrder: [a, b]"),
       order, "requires moduleName"},
      {"moduleName second", with("moduleName: a, modulesLoadingOrder: [b, a]"), order + "[0]",
       "\"b\" must be moduleName \"a\""},
      {"a duplicate", with("moduleName: a, modulesLoadingOrder: [a, b, c, b]"), order + "[3]",
       "\"b\" is already listed at modulesLoadingOrder[1]"},
      {"a duplicate spelt with a dash", with("moduleName: a, modulesLoadingOrder: [a, b_c, b-c]"),
       order + "[2]", "\"b-c\" is already listed at modulesLoadingOrder[1]"},
  });
}

TEST_CASE("validation requires files to sign under the effective dirName") {
  const std::string sign = "spec.moduleLoader.container.sign.filesToSign";
  auto files = [](const std::string& list) {
    return "sign: {keySecret: {name: k}, certSecret: {name: c}, filesToSign: " + list + "}";
  };
  CheckRows({
      {"under the default /opt", Loader().With(files("[/opt/lib/modules/m.ko]")), "", ""},
      {"under a dirName",
       Loader().Modprobe("moduleName: m, dirName: /usr/local").With(files("[/usr/local/m.ko]")), "",
       ""},
      {"no files", Loader().With("sign: {keySecret: {name: k}, certSecret: {name: c}}"), sign,
       "required when sign is set"},
      // As KMM: an explicit empty dirName is the image's root, under which every absolute
      // path is (an unset one is /opt, the CRD's default).
      {"anywhere, with an explicit empty dirName",
       Loader().Modprobe("moduleName: m, dirName: ''").With(files("[/lib/modules/m.ko]")), "", ""},
      {"outside the default /opt", Loader().With(files("[/opt/a.ko, /lib/modules/m.ko]")),
       sign + "[1]", "\"/lib/modules/m.ko\" is not under dirName \"/opt\"; list files under /opt/"},
      {"escaping /opt", Loader().With(files("[/opt/../etc/m.ko]")), sign + "[0]",
       "is not under dirName"},
      {"in a mapping, outside /opt",
       Loader().Mappings("[{literal: '6.1', containerImage: 'r/x:1', " + files("[/m.ko]") + "}]"),
       "spec.moduleLoader.container.kernelMappings[0].sign.filesToSign[0]", "is not under dirName"},
  });
}

TEST_CASE("validation requires dirName and firmwarePath to be absolute and normalised") {
  const std::string modprobe = "spec.moduleLoader.container.modprobe";
  auto with = [](const std::string& fields) {
    return Loader().Modprobe("moduleName: m, " + fields);
  };
  CheckRows({
      {"the root as dirName", with("dirName: /"), "", ""},
      {"usual paths", with("dirName: /usr/lib, firmwarePath: /firmware"), "", ""},
      {"a relative dirName", with("dirName: opt"), modprobe + ".dirName",
       "is not an absolute path"},
      {"a trailing slash", with("dirName: /opt/"), modprobe + ".dirName", "write it as \"/opt\""},
      {"a double slash", with("dirName: /opt//x"), modprobe + ".dirName", "write it as \"/opt/x\""},
      {"a dot", with("dirName: /opt/./x"), modprobe + ".dirName", "is not in normal form"},
      {"a dot-dot", with("dirName: /opt/../x"), modprobe + ".dirName", "has a '..' component"},
      {"the root as firmwarePath", with("firmwarePath: /"), modprobe + ".firmwarePath",
       "name the directory holding the firmware"},
      {"a relative firmwarePath", with("firmwarePath: lib/firmware"), modprobe + ".firmwarePath",
       "is not an absolute path; use an absolute path"},
  });
}

TEST_CASE("validation requires module names the kernel accepts") {
  const std::string c = "spec.moduleLoader.container";
  CheckRows({
      {"a .ko file as moduleName", Loader().Modprobe("moduleName: my-mod.ko"),
       c + ".modprobe.moduleName", "without the .ko suffix"},
      {"a space in the loading order",
       Loader().Modprobe("moduleName: m, modulesLoadingOrder: [m, 'a b']"),
       c + ".modprobe.modulesLoadingOrder[1]", "is not a kernel module name; use 1 to 55"},
      {"a path to remove", Loader().With("inTreeModulesToRemove: [ok, 'x/y']"),
       c + ".inTreeModulesToRemove[1]", "\"x/y\" is not a kernel module name"},
      {"a dot to remove", Loader().With("inTreeModuleToRemove: a.b"), c + ".inTreeModuleToRemove",
       "is not a kernel module name"},
      {"an empty name to remove in a mapping",
       Loader().Mappings("[{regexp: x, containerImage: 'r/x:1', inTreeModulesToRemove: ['']}]"),
       c + ".kernelMappings[0].inTreeModulesToRemove[0]", "\"\" is not a kernel module name"},
  });
}

TEST_CASE("kernel module names are 1 to 55 letters, digits, underscores and dashes") {
  CHECK(IsValidKernelModuleName("nvidia_uvm"));
  CHECK(IsValidKernelModuleName("kmm-ci-a"));
  CHECK(IsValidKernelModuleName(std::string(55, 'a')));
  CHECK_FALSE(IsValidKernelModuleName(std::string(56, 'a')));
  CHECK_FALSE(IsValidKernelModuleName(""));
  CHECK_FALSE(IsValidKernelModuleName("a.ko"));
  CHECK_FALSE(IsValidKernelModuleName("a b"));
  CHECK_FALSE(IsValidKernelModuleName("../a"));
}

TEST_CASE("validation accepts only Kubernetes image pull policies") {
  CheckRows({
      {"Always", Loader().With("imagePullPolicy: Always"), "", ""},
      {"lowercase", Loader().With("imagePullPolicy: always"),
       "spec.moduleLoader.container.imagePullPolicy", "use Always, IfNotPresent or Never"},
      {"in the device plugin",
       "spec: {selector: {}, devicePlugin: {container: {image: 'r/dp:1', imagePullPolicy: "
       "Sometimes}}}\n",
       "spec.devicePlugin.container.imagePullPolicy", "\"Sometimes\" is not a pull policy"},
  });
}

TEST_CASE("validation reports every error in field order") {
  const Module m = Decode(std::string(kHeader) + R"(spec:
  selector: {}
  devicePlugin: {container: {image: 'r/dp:1'}, volumes: [{name: v, hostPath: {path: /etc}}]}
  moduleLoader:
    container:
      containerImage: reg/x
      kernelMappings:
        - {regexp: '(', literal: '6.1', containerImage: ''}
        - {literal: '6.2', containerImage: 'r/x:1'}
      modprobe: {moduleName: a.ko, dirName: /opt/}
  tolerations: [{operator: Equal}]
)");
  std::vector<std::string> paths;
  for (const FieldError& e : ValidateModule(m)) {
    paths.push_back(e.path);
  }
  CHECK(paths == std::vector<std::string>{
                     "spec.devicePlugin.volumes[0].hostPath.path",
                     "spec.moduleLoader.container.containerImage",
                     "spec.moduleLoader.container.kernelMappings[0]",
                     "spec.moduleLoader.container.kernelMappings[0].regexp",
                     "spec.moduleLoader.container.modprobe.moduleName",
                     "spec.moduleLoader.container.modprobe.dirName",
                     "spec.tolerations[0].operator",
                 });
}

TEST_CASE("update validation refuses to set or clear the version") {
  auto versioned = [](const std::string& version) {
    return Decode(kHeader + std::string(Loader().With("version: '" + version + "'")));
  };
  const std::string path = "spec.moduleLoader.container.version";
  for (auto [from, to, message] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"v1", "v2", ""},
           {"", "", ""},
           {"", "v2", "cannot change from unset to \"v2\"; to set or clear the version, delete"},
           {"v1", "", "cannot change from \"v1\" to unset"},
       }) {
    DYNAMIC_SECTION("from '" << from << "' to '" << to << "'") {
      Check(ValidateModuleUpdate(versioned(from), versioned(to)),
            message.empty() ? Row{} : Row{"", "", path, message});
    }
  }
}

TEST_CASE("update validation also applies every rule to the new Module") {
  const Module old_module = Decode(kHeader + std::string(Loader()));
  const Module new_module =
      Decode(kHeader + std::string(Loader().With("version: v2, imagePullPolicy: Sometimes")));
  const std::vector<FieldError> errors = ValidateModuleUpdate(old_module, new_module);
  REQUIRE(errors.size() == 2);
  CHECK(errors[0].path == "spec.moduleLoader.container.version");
  CHECK(errors[1].path == "spec.moduleLoader.container.imagePullPolicy");
}

TEST_CASE("update validation ignores the version when either Module loads no modules") {
  const Module without_loader = Decode(kHeader + std::string("spec: {selector: {}}\n"));
  const Module with_version = Decode(kHeader + std::string(Loader().With("version: v1")));
  CHECK(ValidateModuleUpdate(without_loader, with_version).empty());
  CHECK(ValidateModuleUpdate(with_version, without_loader).empty());
}

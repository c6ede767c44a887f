#include "controller/kube_mode/dra_writer.h"

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "common/json.h"
#include "controller/kube_mode/device_plugin_writer.h"
#include "tests/controller/kube_mode/writer_harness.h"

using kmodd::StringAt;
using kmodd::ToJsonLine;
using kmodd::Value;
using kmodd::server::DraWriter;
using kmodd::testing::Image;
using kmodd::testing::IsOk;

namespace {

const std::string kDaemonSets = kmodd::kube::ResourcePath("apps/v1", "daemonsets", "drivers");
const std::string kDeviceClasses = "/apis/resource.k8s.io/v1/deviceclasses";

// A DRA Module without a moduleLoader; `classes` its deviceClasses' YAML flow list.
std::string Dra(const std::string& image, const std::string& classes) {
  return "spec:\n  selector: {gpu: \"true\"}\n  dra:\n    driverName: gpu.example.com\n"
         "    container: {image: '" + image + "'}\n    deviceClasses: " + classes + "\n";
}

const std::string kTwoClasses =
    "[{name: gpu.example.com, selectors: [{cel: {expression: 'device.driver == \"gpu.example.com\"'}}],"
    " config: [{opaque: {driver: gpu.example.com, parameters: {sharing: none}}}]},"
    " {name: big.gpu.example.com, selectors: [{cel: {expression: 'device.attributes[\"gpu.example.com\"].big'}}]}]";

struct Harness : kmodd::testing::WriterHarness<DraWriter> {
  std::vector<Value> DaemonSets() { return Objects(kDaemonSets); }
  // Name -> spec, as JSON.
  std::map<std::string, std::string> Classes() {
    std::map<std::string, std::string> out;
    for (const auto& [name, dc] : api.Objects(kDeviceClasses)) {
      out[name] = ToJsonLine(*kmodd::Lookup(dc, {"spec"}));
    }
    return out;
  }
  // A DeviceClass made by someone else, with `labels` (JSON).
  void Foreign(const std::string& name, const std::string& labels) {
    REQUIRE(api.Create(kDeviceClasses, kmodd::testing::Json(R"({"metadata": {"name": ")" + name +
                                                             R"(", "labels": )" + labels +
                                                             R"(}, "spec": {}})"))
                .ok());
  }
};

}  // namespace

TEST_CASE("DRA writer: the DaemonSet and the DeviceClasses made, kept, updated, pruned and deleted with the Module") {
  Harness h;
  h.Set(Dra("reg/dra:1", kTwoClasses));
  CHECK(IsOk(h.Run()));
  std::vector<Value> ds = h.DaemonSets();
  REQUIRE(ds.size() == 1);
  const std::string name = StringAt(ds[0], {"metadata", "name"});
  CHECK(name.rfind("gpu-dra-", 0) == 0);
  CHECK(StringAt(ds[0], {"metadata", "labels", "kmm.node.kubernetes.io/role"}) == "dra");
  CHECK(StringAt(ds[0], {"metadata", "annotations", "kmodd.io/dra-spec"}).size() == 16);
  CHECK(h.Classes() ==
        std::map<std::string, std::string>{
            {"big.gpu.example.com",
             R"({"selectors":[{"cel":{"expression":"device.attributes[\"gpu.example.com\"].big"}}]})"},
            {"gpu.example.com",
             R"({"selectors":[{"cel":{"expression":"device.driver == \"gpu.example.com\""}}],)"
             R"("config":[{"opaque":{"driver":"gpu.example.com","parameters":{"sharing":"none"}}}]})"}});
  const Value dc = h.api.Get(kDeviceClasses + "/gpu.example.com").value();
  CHECK(ToJsonLine(*kmodd::Lookup(dc, {"metadata", "labels"})) ==
        R"({"kmm.node.kubernetes.io/module.name":"gpu","kmm.node.kubernetes.io/module.namespace":"drivers"})");
  CHECK(kmodd::Lookup(dc, {"metadata", "ownerReferences"}) == nullptr);

  // Nothing changed: nothing written.
  CHECK(IsOk(h.Run()));
  CHECK(h.Writes(kDaemonSets) == 1);
  CHECK(h.Writes(kDeviceClasses) == 2);

  // One selector changed and the other class dropped; a new image: the DaemonSet replaced.
  h.Set(Dra("reg/dra:2", "[{name: gpu.example.com, selectors: [{cel: {expression: 'true'}}]}]"));
  CHECK(IsOk(h.Run()));
  CHECK(h.Classes() == std::map<std::string, std::string>{
                           {"gpu.example.com", R"({"selectors":[{"cel":{"expression":"true"}}]})"}});
  ds = h.DaemonSets();
  REQUIRE(ds.size() == 1);
  CHECK(StringAt(ds[0], {"metadata", "name"}) == name);
  CHECK(Image(ds[0]) == "reg/dra:2");

  // The Module being deleted while its nodes still unload it (kmodd's finalizer on it): the
  // DaemonSet goes first, the classes stay until the finalizer is released.
  h.view.metas["drivers/gpu"].deleting = true;
  h.view.metas["drivers/gpu"].finalizers = {"kmodd.io/unload"};
  h.view.reported = {"drivers/gpu"};
  CHECK(IsOk(h.Run()));
  CHECK(h.DaemonSets().empty());
  CHECK(h.Classes().size() == 1);
  // No node reports it any more (the pass that releases the finalizer): the classes go.
  h.view.reported.clear();
  CHECK(IsOk(h.Run()));
  CHECK(h.Classes().empty());
}

TEST_CASE("DRA writer: spec.dra removed, or the Module gone, takes its DaemonSet and DeviceClasses and nothing else") {
  Harness h;
  h.Set(Dra("reg/dra:1", kTwoClasses));
  CHECK(IsOk(h.Run()));
  h.Foreign("other.example.com", R"({"kmm.node.kubernetes.io/module.name": "gpu",
                                     "kmm.node.kubernetes.io/module.namespace": "elsewhere"})");
  REQUIRE(h.api.Create(kDaemonSets, kmodd::testing::Json(R"({"metadata": {"name": "plugin",
      "labels": {"kmm.node.kubernetes.io/module.name": "gpu", "kmm.node.kubernetes.io/role": "device-plugin"}}})")).ok());

  SECTION("spec.dra removed") {
    h.Set("spec: {selector: {gpu: \"true\"}}");
  }
  SECTION("the Module gone") {
    h.view.metas.clear();
    h.view.objects.clear();
  }
  CHECK(IsOk(h.Run()));
  std::vector<Value> ds = h.DaemonSets();
  REQUIRE(ds.size() == 1);
  CHECK(StringAt(ds[0], {"metadata", "name"}) == "plugin");
  CHECK(h.Classes() == std::map<std::string, std::string>{{"other.example.com", "{}"}});
}

TEST_CASE("the device plugin writer leaves the DRA DaemonSet alone") {
  kmodd::testing::WriterHarness<kmodd::server::DevicePluginWriter> plugin;
  plugin.Set(Dra("reg/dra:1", "[]"));
  REQUIRE(plugin.api.Create(kDaemonSets, kmodd::testing::Json(R"({"metadata": {"name": "gpu-dra-x",
      "labels": {"kmm.node.kubernetes.io/module.name": "gpu", "kmm.node.kubernetes.io/role": "dra"}}})")).ok());
  CHECK(IsOk(plugin.Run()));
  CHECK(plugin.Objects(kDaemonSets).size() == 1);
}

TEST_CASE("DRA writer: a DeviceClass name taken by another is refused, not overwritten, and told once") {
  Harness h;
  std::string owner;
  SECTION("no Module's") {
    h.Foreign("gpu.example.com", "{}");
    owner = "no Module's labels";
  }
  SECTION("a Module of the same name in another namespace") {
    h.Foreign("gpu.example.com", R"({"kmm.node.kubernetes.io/module.name": "gpu",
                                     "kmm.node.kubernetes.io/module.namespace": "elsewhere"})");
    owner = "Module elsewhere/gpu";
  }
  h.Set(Dra("reg/dra:1", kTwoClasses));
  kmodd::server::ReconcileResult r = h.Run();
  CHECK(absl::IsFailedPrecondition(r.error));
  std::map<std::string, std::string> classes = h.Classes();
  CHECK(classes["gpu.example.com"] == "{}");  // untouched
  CHECK(classes.count("big.gpu.example.com") == 1);  // the others are made all the same
  CHECK(h.DaemonSets().size() == 1);
  const std::vector<std::string> told{
      "DraRefused: the DeviceClass gpu.example.com exists and is not this Module's (" + owner +
      "): kmodd does not overwrite it; rename the class or delete that one"};
  CHECK(h.ModuleEvents() == told);
  CHECK_FALSE(h.Run().error.ok());
  CHECK(h.ModuleEvents() == told);

  // Once the other is gone, the Module's is made.
  REQUIRE(h.api.Delete(kDeviceClasses + "/gpu.example.com").ok());
  CHECK(IsOk(h.Run()));
  CHECK(StringAt(h.api.Get(kDeviceClasses + "/gpu.example.com").value(),
                 {"metadata", "labels", "kmm.node.kubernetes.io/module.namespace"}) == "drivers");
}

TEST_CASE("DRA writer: a DeviceClass the API server refuses is a DraRefused Event with its words, once") {
  Harness h;
  h.Set(Dra("reg/dra:1", "[{name: gpu.example.com, selectors: [{cel: {expression: '('}}]}]"));
  h.api.FailNext(absl::OkStatus());  // the DaemonSet LIST
  h.api.FailNext(absl::OkStatus());  // its POST
  h.api.FailNext(absl::OkStatus());  // the DeviceClass LIST
  h.api.FailNext(absl::InvalidArgumentError("POST deviceclasses: 422 Invalid: spec.selectors[0].cel.expression"));
  CHECK(absl::IsInvalidArgument(h.Run().error));
  CHECK(h.ModuleEvents() == std::vector<std::string>{
                                "DraRefused: the DeviceClass gpu.example.com was refused: "
                                "POST deviceclasses: 422 Invalid: spec.selectors[0].cel.expression"});
  CHECK(h.Classes().empty());
  CHECK(IsOk(h.Run()));
  CHECK(h.Classes().size() == 1);
}

TEST_CASE("DRA writer: without DeviceClasses (Kubernetes before 1.34, or not granted) a Module without DRA is fine and one with is told") {
  Harness h;
  const absl::Status missing = absl::NotFoundError("GET /apis/resource.k8s.io/v1/deviceclasses: 404");
  h.Set("spec: {selector: {gpu: \"true\"}}");
  h.api.FailNext(absl::OkStatus());  // the DaemonSet LIST
  h.api.FailNext(missing);
  CHECK(IsOk(h.Run()));
  h.Set(Dra("reg/dra:1", kTwoClasses));
  h.api.FailNext(absl::OkStatus());
  h.api.FailNext(absl::OkStatus());
  h.api.FailNext(missing);
  CHECK(absl::IsNotFound(h.Run().error));
  CHECK(h.ModuleEvents() ==
        std::vector<std::string>{"DraRefused: the DeviceClasses cannot be listed (resource.k8s.io/v1, "
                                 "Kubernetes 1.34 or later): GET /apis/resource.k8s.io/v1/deviceclasses: 404"});
  CHECK(h.DaemonSets().size() == 1);  // the driver is written all the same
}

#include "controller/kube_mode/device_plugin_writer.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/json.h"
#include "tests/controller/kube_mode/writer_harness.h"

using kmodd::IntAt;
using kmodd::StringAt;
using kmodd::Value;
using kmodd::server::DevicePluginWriter;
using kmodd::server::ReconcileResult;

namespace {

const std::string kDaemonSets = kmodd::kube::ResourcePath("apps/v1", "daemonsets", "drivers");

std::string Loader(const std::string& version, const std::string& plugin_image) {
  std::string out = "spec:\n  selector: {gpu: \"true\"}\n  moduleLoader:\n    container:\n";
  if (!version.empty()) {
    out += "      version: " + version + "\n";
  }
  out += "      modprobe: {moduleName: gpu}\n"
         "      kernelMappings: [{regexp: '^.+$', containerImage: 'reg/gpu:1'}]\n";
  if (!plugin_image.empty()) {
    out += "  devicePlugin: {container: {image: '" + plugin_image + "'}}\n";
  }
  return out;
}

struct Harness : kmodd::testing::WriterHarness<DevicePluginWriter> {
  std::vector<Value> DaemonSets() { return Objects(kDaemonSets); }
  size_t Writes() { return WriterHarness::Writes(kDaemonSets); }
};

using kmodd::testing::Image;
using kmodd::testing::IsOk;

}  // namespace

TEST_CASE("device plugin writer: creates the DaemonSet once, replaces it when the plugin changes, deletes it with the plugin") {
  Harness h;
  h.Set(Loader("", "reg/plugin:1"));
  CHECK(IsOk(h.Run()));
  std::vector<Value> ds = h.DaemonSets();
  REQUIRE(ds.size() == 1);
  const std::string name = StringAt(ds[0], {"metadata", "name"});
  CHECK(name.rfind("gpu-device-plugin-", 0) == 0);
  CHECK(StringAt(kmodd::Lookup(ds[0], {"metadata", "ownerReferences"})->AsList()[0], {"uid"}) == "u-1");
  CHECK(Image(ds[0]) == "reg/plugin:1");

  // Nothing changed: nothing written (the API server's defaults do not count).
  CHECK(IsOk(h.Run()));
  CHECK(h.Writes() == 1);

  // A new plugin image: the same DaemonSet, replaced.
  h.Set(Loader("", "reg/plugin:2"));
  CHECK(IsOk(h.Run()));
  ds = h.DaemonSets();
  REQUIRE(ds.size() == 1);
  CHECK(StringAt(ds[0], {"metadata", "name"}) == name);
  CHECK(Image(ds[0]) == "reg/plugin:2");
  CHECK(h.Writes() == 2);

  // The plugin removed from the Module: its DaemonSet goes; the module loader's stays.
  REQUIRE(h.api.Create(kDaemonSets, *kmodd::ParseJson(R"({"metadata": {"name": "loader",
      "labels": {"kmm.node.kubernetes.io/module.name": "gpu", "kmm.node.kubernetes.io/role": "module-loader"}}})")).ok());
  h.Set(Loader("", ""));
  CHECK(IsOk(h.Run()));
  ds = h.DaemonSets();
  REQUIRE(ds.size() == 1);
  CHECK(StringAt(ds[0], {"metadata", "name"}) == "loader");
}

TEST_CASE("device plugin writer: a new version gets its own DaemonSet; the old one, scheduling nowhere, goes") {
  // The API server's DaemonSet controller has not written a status here: KMM reads the
  // absent desiredNumberScheduled as 0 (Go's zero value), and so does kmodd.
  Harness h;
  h.Set(Loader("v1", "reg/plugin:1"));
  CHECK(IsOk(h.Run()));
  const std::string v1 = StringAt(h.DaemonSets().at(0), {"metadata", "name"});
  h.Set(Loader("v2", "reg/plugin:2"));
  CHECK(IsOk(h.Run()));
  std::vector<Value> ds = h.DaemonSets();
  REQUIRE(ds.size() == 1);
  CHECK(StringAt(ds[0], {"metadata", "name"}) != v1);
  CHECK(StringAt(ds[0], {"metadata", "labels",
                         "beta.kmm.node.kubernetes.io/version-schedule-pod.drivers.gpu"}) == "v2");
  CHECK(Image(ds[0]) == "reg/plugin:2");
}

TEST_CASE("device plugin writer: the old version's DaemonSet stays while it still schedules pods") {
  Harness h;
  h.Set(Loader("v1", "reg/plugin:1"));
  CHECK(IsOk(h.Run()));
  const std::string v1 = StringAt(h.DaemonSets().at(0), {"metadata", "name"});
  REQUIRE(h.api.MergePatch(kDaemonSets + "/" + v1 + "/status",
                           *kmodd::ParseJson(R"({"status": {"desiredNumberScheduled": 2}})"))
              .ok());
  h.Set(Loader("v2", "reg/plugin:2"));
  CHECK(IsOk(h.Run()));
  CHECK(h.DaemonSets().size() == 2);
  REQUIRE(h.api.MergePatch(kDaemonSets + "/" + v1 + "/status",
                           *kmodd::ParseJson(R"({"status": {"desiredNumberScheduled": 0}})"))
              .ok());
  CHECK(IsOk(h.Run()));
  std::vector<Value> ds = h.DaemonSets();
  REQUIRE(ds.size() == 1);
  CHECK(Image(ds[0]) == "reg/plugin:2");
}

TEST_CASE("device plugin writer: a deleted Module's DaemonSets go") {
  Harness h;
  h.Set(Loader("", "reg/plugin:1"));
  CHECK(IsOk(h.Run()));
  REQUIRE(h.DaemonSets().size() == 1);
  h.view.metas["drivers/gpu"].deleting = true;
  CHECK(IsOk(h.Run()));
  CHECK(h.DaemonSets().empty());
}

TEST_CASE("device plugin writer: a refusal is a Warning Event with the API server's words, once, and retried") {
  Harness h;
  h.Set(Loader("", "reg/plugin:1"));
  h.api.FailNext(absl::OkStatus());  // the LIST
  h.api.FailNext(absl::InvalidArgumentError(
      "POST daemonsets: 422 Invalid: spec.template.spec.volumes[1].name: Duplicate value"));
  ReconcileResult r = h.Run();
  CHECK(absl::IsInvalidArgument(r.error));
  CHECK(h.ModuleEvents() ==
        std::vector<std::string>{"DevicePluginRefused: the device plugin DaemonSet was refused: "
                                 "POST daemonsets: 422 Invalid: spec.template.spec.volumes[1]."
                                 "name: Duplicate value"});
  CHECK(h.DaemonSets().empty());
  auto conditions = h.writer.Conditions(h.view, "drivers/gpu");
  REQUIRE(conditions.size() == 1);
  CHECK(conditions[0].type == "DevicePluginAccepted");
  CHECK(conditions[0].status == "False");
  CHECK(conditions[0].reason == "Refused");
  CHECK(conditions[0].message.find("Duplicate value") != std::string::npos);
  // Retried (the queue's backoff): written now.
  CHECK(IsOk(h.Run()));
  CHECK(h.DaemonSets().size() == 1);
  CHECK(h.ModuleEvents().size() == 1);
  conditions = h.writer.Conditions(h.view, "drivers/gpu");
  REQUIRE(conditions.size() == 1);
  CHECK(conditions[0].status == "True");
  // Without a plugin, no such condition.
  h.Set(Loader("", ""));
  CHECK(h.writer.Conditions(h.view, "drivers/gpu").empty());
}

TEST_CASE("device plugin writer: without DaemonSet access, a Module without a plugin is fine and one with is told") {
  Harness h;
  h.Set(Loader("", ""));
  h.api.FailNext(absl::PermissionDeniedError("LIST daemonsets: 403 Forbidden"));
  CHECK(IsOk(h.Run()));
  h.Set(Loader("", "reg/plugin:1"));
  h.api.FailNext(absl::PermissionDeniedError("LIST daemonsets: 403 Forbidden"));
  CHECK(absl::IsPermissionDenied(h.Run().error));
  CHECK(h.ModuleEvents() == std::vector<std::string>{
                                "DevicePluginRefused: the device plugin DaemonSet was refused: "
                                "LIST daemonsets: 403 Forbidden"});
}

#include "controller/kube_mode/node_labeler.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/decode.h"
#include "common/json.h"
#include "fake_writer_view.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/fake_kube_client.h"

using kmodd::Value;
using kmodd::server::Labels;
using kmodd::server::NodeLabeler;
using kmodd::server::NodeRecord;
using kmodd::server::ReconcileResult;
using kmodd::server::ReportedModule;

namespace {

constexpr char kReadyA[] = "kmm.node.kubernetes.io/ns.a.ready";

struct Harness {
  Harness()
      : devnull(std::fopen("/dev/null", "w")),
        log(devnull),
        events(api, clock, "kmm", "test"),
        labeler(api, events, clock, log) {}
  ~Harness() { std::fclose(devnull); }

  // Node `name` in the API with `labels`, as the watch has it too.
  void AddNode(const std::string& name, const Labels& labels) {
    Value l = Value::EmptyMap();
    for (const auto& [k, v] : labels) {
      l.Set(k, v);
    }
    auto created = api.Create(kmodd::kube::ResourcePath("v1", "nodes"),
                              Value(Value::Map{{"metadata", Value(Value::Map{{"name", name},
                                                                             {"labels", l}})}}));
    REQUIRE(created.ok());
    view.nodes[name] = kmodd::source::NodeMeta{
        name, kmodd::StringAt(*created, {"metadata", "uid"}), labels};
  }
  // The watch catches up with the API server.
  void Watched(const std::string& name) { view.nodes[name].labels = LabelsOf(name); }
  Labels LabelsOf(const std::string& name) {
    auto n = api.Get(kmodd::kube::ResourcePath("v1", "nodes", "", name));
    REQUIRE(n.ok());
    Labels out;
    if (const Value* l = kmodd::Lookup(*n, {"metadata", "labels"}); l != nullptr && l->IsMap()) {
      for (const auto& [k, v] : l->AsMap()) {
        out[k] = v.AsString();
      }
    }
    return out;
  }
  // "<reason> <node>" of every Event recorded about Nodes, sorted.
  std::vector<std::string> NodeEvents() {
    std::vector<std::string> out;
    for (const auto& [name, e] :
         api.Objects(kmodd::kube::ResourcePath("v1", "events", "default"))) {
      out.push_back(absl::StrCat(kmodd::StringAt(e, {"reason"}), " ",
                                 kmodd::StringAt(e, {"involvedObject", "name"})));
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  size_t Patches(const std::string& node) {
    size_t n = 0;
    for (const std::string& call : api.calls()) {
      n += call == "PATCH " + kmodd::kube::ResourcePath("v1", "nodes", "", node) ? 1 : 0;
    }
    return n;
  }

  std::FILE* devnull;
  kmodd::Logger log;
  kmodd::kube::FakeKubeClient api;
  kmodd::FakeClock clock;
  kmodd::kube::EventRecorder events;
  kmodd::testing::FakeWriterView view;
  NodeLabeler labeler;
};

NodeRecord Reported(const std::string& name, bool connected,
                    std::vector<ReportedModule> modules) {
  NodeRecord r;
  r.name = name;
  r.connected = connected;
  r.reported = connected;
  r.modules = std::move(modules);
  return r;
}

bool IsOk(const ReconcileResult& r) { return r.error.ok() && r.requeue_after.count() == 0; }

}  // namespace

TEST_CASE("node labeler: a Loaded report labels the node, then records ModuleLoaded") {
  Harness h;
  h.AddNode("w1", {{"role", "worker"}});
  h.view.records["w1"] = Reported("w1", true, {{"ns/a", kmodd::api::Phase::kLoaded, "", "", "v2", 0},
                                               {"ns/b", kmodd::api::Phase::kLoading, "", "", "", 0}});
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(h.LabelsOf("w1") == Labels{{"role", "worker"},
                                 {kReadyA, ""},
                                 {"kmm.node.kubernetes.io/ns.a.version.ready", "v2"}});
  CHECK(h.NodeEvents() == std::vector<std::string>{"ModuleLoaded w1"});

  // Unloaded: the label goes, and ModuleUnloaded says so.
  h.Watched("w1");
  h.view.records["w1"] = Reported("w1", true, {});
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(h.LabelsOf("w1") == Labels{{"role", "worker"}});
  CHECK(h.NodeEvents() == std::vector<std::string>{"ModuleLoaded w1", "ModuleUnloaded w1"});
}

TEST_CASE("node labeler: after a failover, nodes not yet heard from keep their labels") {
  // A new leader: w1's agent is connected but has not reported on its new stream yet,
  // w2's has not come back at all. Both keep their modules loaded meanwhile.
  Harness h;
  h.AddNode("w1", {{kReadyA, ""}});
  h.AddNode("w2", {{kReadyA, ""}});
  NodeRecord w1 = Reported("w1", true, {});
  w1.reported = false;
  h.view.records["w1"] = w1;
  h.view.records["w2"] = Reported("w2", false, {});
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w2")));
  CHECK(h.LabelsOf("w1") == Labels{{kReadyA, ""}});
  CHECK(h.LabelsOf("w2") == Labels{{kReadyA, ""}});
  CHECK(h.Patches("w1") + h.Patches("w2") == 0);
  CHECK(h.NodeEvents().empty());

  // w1 reports it still runs the module: nothing to write. w2's agent is away for good,
  // its last report (as the previous leader had it) is not known here: labels stay.
  h.view.records["w1"] = Reported("w1", true, {{"ns/a", kmodd::api::Phase::kLoaded, "", "", "", 0}});
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(h.Patches("w1") == 0);

  // A disconnected node whose agent did report to this leader is labelled from that report.
  h.view.records["w2"] = Reported("w2", false, {{"ns/a", kmodd::api::Phase::kFailed, "", "", "", 0}});
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w2")));
  CHECK(h.LabelsOf("w2").empty());
}

TEST_CASE("node labeler: a write the watch does not show yet is not repeated until kRecheck") {
  Harness h;
  h.AddNode("w1", {});
  h.view.records["w1"] = Reported("w1", true, {{"ns/a", kmodd::api::Phase::kLoaded, "", "", "", 0}});
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  REQUIRE(h.Patches("w1") == 1);
  // The watch lags: the view still has no label. Looked at again later, not written again.
  ReconcileResult r = h.labeler.Reconcile(h.view, "w1");
  CHECK(r.error.ok());
  CHECK(r.requeue_after == NodeLabeler::kRecheck);
  CHECK(h.Patches("w1") == 1);
  CHECK(h.NodeEvents() == std::vector<std::string>{"ModuleLoaded w1"});

  // Someone removes it by hand; once kRecheck has passed it is written again.
  REQUIRE(h.api.MergePatch(kmodd::kube::ResourcePath("v1", "nodes", "", "w1"),
                           *kmodd::ParseJson(absl::StrCat(R"({"metadata":{"labels":{")", kReadyA,
                                                          R"(":null}}})")))
              .ok());
  h.Watched("w1");
  h.clock.Advance(std::chrono::seconds(10));
  r = h.labeler.Reconcile(h.view, "w1");
  CHECK(r.requeue_after == std::chrono::seconds(20));
  h.clock.Advance(std::chrono::seconds(20));
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(h.LabelsOf("w1") == Labels{{kReadyA, ""}});
  CHECK(h.Patches("w1") == 3);  // ours, the hand's, ours again
}

TEST_CASE("node labeler: a label wanted back before the watch shows it removed is written back") {
  // A leader failover: w1's record briefly lacked the module, its label was removed; its
  // next report has it Loaded again while the watch still shows the label (the removal not
  // seen yet). The watch agrees with what is wanted, the API does not: written again, at
  // once (nothing else would come back to this node: our own label is no hub change).
  Harness h;
  h.AddNode("w1", {{kReadyA, ""}});
  h.view.records["w1"] = Reported("w1", true, {});
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  REQUIRE(h.LabelsOf("w1").empty());
  h.view.records["w1"] = Reported("w1", true, {{"ns/a", kmodd::api::Phase::kLoaded, "", "", "", 0}});
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));  // the view's Node still has the label
  CHECK(h.LabelsOf("w1") == Labels{{kReadyA, ""}});
  CHECK(h.Patches("w1") == 2);
}

TEST_CASE("node labeler: a failed write is an error for the queue to retry, and nothing is evented") {
  Harness h;
  h.AddNode("w1", {});
  h.view.records["w1"] = Reported("w1", true, {{"ns/a", kmodd::api::Phase::kLoaded, "", "", "", 0}});
  h.api.FailNext(absl::UnavailableError("the API server is away"));
  CHECK(absl::IsUnavailable(h.labeler.Reconcile(h.view, "w1").error));
  CHECK(h.LabelsOf("w1").empty());
  CHECK(h.NodeEvents().empty());
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));  // the retry
  CHECK(h.LabelsOf("w1") == Labels{{kReadyA, ""}});
  CHECK(h.NodeEvents() == std::vector<std::string>{"ModuleLoaded w1"});
}

TEST_CASE("node labeler: refused labels are asked again after RefusedLabels::kRetry, not before") {
  Harness h;
  h.AddNode("w1", {});
  h.view.records["w1"] = Reported("w1", true, {{"ns/a", kmodd::api::Phase::kLoaded, "", "", "v1", 0}});
  for (int i = 0; i < 3; ++i) {  // the patch, then each label alone
    h.api.FailNext(absl::InvalidArgumentError("422 Invalid: metadata.labels: Invalid value"));
  }
  ReconcileResult r = h.labeler.Reconcile(h.view, "w1");
  CHECK(r.error.ok());
  CHECK(r.requeue_after == kmodd::server::RefusedLabels::kRetry);
  CHECK(h.LabelsOf("w1").empty());
  CHECK(h.NodeEvents() == std::vector<std::string>{"NodeLabelRefused w1", "NodeLabelRefused w1"});

  h.clock.Advance(kmodd::server::RefusedLabels::kRetry - std::chrono::seconds(1));
  r = h.labeler.Reconcile(h.view, "w1");
  CHECK(r.requeue_after == std::chrono::seconds(1));
  CHECK(h.Patches("w1") == 3);  // not asked again yet

  h.clock.Advance(std::chrono::seconds(1));
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(h.LabelsOf("w1") == Labels{{kReadyA, ""}, {"kmm.node.kubernetes.io/ns.a.version.ready", "v1"}});
}

namespace {

kmodd::api::Module PluginModule(const std::string& tolerations = "[]") {
  const std::string text =
      "apiVersion: kmm.sigs.x-k8s.io/v1beta1\nkind: Module\nmetadata: {name: a, namespace: ns}\n"
      "spec:\n  selector: {role: worker}\n  tolerations: " + tolerations + "\n"
      "  devicePlugin: {container: {image: 'r/p:1'}}\n";
  kmodd::api::Decoded d = kmodd::api::DecodeDocuments(text, "m.yaml");
  REQUIRE(d.errors.empty());
  REQUIRE(d.modules.size() == 1);
  return d.modules[0].object;
}

constexpr char kTargetA[] = "kmm.node.kubernetes.io/ns.a.device-plugin-target";

}  // namespace

TEST_CASE("node labeler: a device plugin's target label follows selection and cordon, as KMM's") {
  Harness h;
  h.AddNode("w1", {{"role", "worker"}});
  h.AddNode("i1", {{"role", "infra"}});
  h.view.plugin_modules = {PluginModule()};
  h.view.records["w1"] = Reported("w1", true, {{"ns/a", kmodd::api::Phase::kLoaded, "", "", "", 0}});
  h.view.records["i1"] = Reported("i1", true, {});
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(IsOk(h.labeler.Reconcile(h.view, "i1")));
  CHECK(h.LabelsOf("w1") == Labels{{"role", "worker"}, {kReadyA, ""}, {kTargetA, ""}});
  CHECK(h.LabelsOf("i1") == Labels{{"role", "infra"}});

  // Cordoned: the target goes (a drain evicts the plugin), the module's label stays.
  h.Watched("w1");
  h.view.nodes["w1"].unschedulable = true;
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(h.LabelsOf("w1") == Labels{{"role", "worker"}, {kReadyA, ""}});
  // Uncordoned, but a NoSchedule taint the Module does not tolerate: still no target.
  h.Watched("w1");
  h.view.nodes["w1"].unschedulable = false;
  h.view.nodes["w1"].taints = {{"gpu", "maintenance", "NoSchedule"}};
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(h.LabelsOf("w1").count(kTargetA) == 0);
  // Tolerated: back.
  h.view.plugin_modules = {PluginModule("[{key: gpu, operator: Exists, effect: NoSchedule}]")};
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(h.LabelsOf("w1").count(kTargetA) == 1);
  // The plugin removed from the Module: the target goes, the module's label stays.
  h.Watched("w1");
  h.view.plugin_modules.clear();
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(h.LabelsOf("w1") == Labels{{"role", "worker"}, {kReadyA, ""}});
  // No Node Event for a target label: ModuleLoaded once, from the .ready label.
  CHECK(h.NodeEvents() == std::vector<std::string>{"ModuleLoaded w1"});
}

TEST_CASE("node labeler: a node not heard from since a failover gets its target label and keeps its module labels") {
  Harness h;
  h.AddNode("w1", {{"role", "worker"}, {kReadyA, ""}});
  h.view.plugin_modules = {PluginModule()};
  NodeRecord w1 = Reported("w1", true, {});
  w1.reported = false;
  h.view.records["w1"] = w1;
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(h.LabelsOf("w1") == Labels{{"role", "worker"}, {kReadyA, ""}, {kTargetA, ""}});
}

namespace {

// ns/a with a versioned moduleLoader and a device plugin.
kmodd::api::Module VersionedPluginModule(const std::string& version) {
  const std::string text =
      "apiVersion: kmm.sigs.x-k8s.io/v1beta1\nkind: Module\nmetadata: {name: a, namespace: ns}\n"
      "spec:\n  selector: {role: worker}\n"
      "  devicePlugin: {container: {image: 'r/p:1'}}\n"
      "  moduleLoader:\n    container:\n      version: '" + version + "'\n"
      "      modprobe: {moduleName: m}\n"
      "      kernelMappings: [{regexp: '^.+$', containerImage: 'r/a:" + version + "'}]\n";
  kmodd::api::Decoded d = kmodd::api::DecodeDocuments(text, "m.yaml");
  REQUIRE(d.errors.empty());
  REQUIRE(d.modules.size() == 1);
  return d.modules[0].object;
}

constexpr char kScheduleA[] = "beta.kmm.node.kubernetes.io/version-schedule-pod.ns.a";
constexpr char kPluginReadyA[] = "kmm.node.kubernetes.io/ns.a.device-plugin-ready";
constexpr char kDraReadyA[] = "kmm.node.kubernetes.io/ns.a.dra-ready";

}  // namespace

TEST_CASE("node labeler: a draining Module loses its target and schedule labels until its new version is loaded") {
  Harness h;
  h.AddNode("w1", {{"role", "worker"}});
  h.view.plugin_modules = {VersionedPluginModule("v2")};
  const Labels v1_loaded{{"role", "worker"},
                         {kReadyA, ""},
                         {"kmm.node.kubernetes.io/ns.a.version.ready", "v1"},
                         {kTargetA, ""},
                         {kScheduleA, "v1"}};
  h.view.records["w1"] = Reported("w1", true, {{"ns/a", kmodd::api::Phase::kLoaded, "", "", "v1", 0}});
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(h.LabelsOf("w1") == v1_loaded);

  // The plan says v2, the node runs v1 under its plugin: the plugin is drained first.
  h.Watched("w1");
  h.view.draining["w1"] = {"ns/a"};
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(h.LabelsOf("w1") == Labels{{"role", "worker"},
                                   {kReadyA, ""},
                                   {"kmm.node.kubernetes.io/ns.a.version.ready", "v1"}});
  // v2 loaded: the labels come back with the new version, and the v2 plugin may start.
  h.Watched("w1");
  h.view.draining.clear();
  h.view.records["w1"] = Reported("w1", true, {{"ns/a", kmodd::api::Phase::kLoaded, "", "", "v2", 0}});
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(h.LabelsOf("w1") == Labels{{"role", "worker"},
                                   {kReadyA, ""},
                                   {"kmm.node.kubernetes.io/ns.a.version.ready", "v2"},
                                   {kTargetA, ""},
                                   {kScheduleA, "v2"}});
}

TEST_CASE("node labeler: .device-plugin-ready and .dra-ready follow the Ready Pods, once they are listed") {
  Harness h;
  h.AddNode("w1", {{"role", "worker"}, {kPluginReadyA, ""}, {"kmm.node.kubernetes.io/ns.b.dra-ready", ""}});
  h.view.records["w1"] = Reported("w1", true, {});
  // Not listed yet: the labels a previous leader wrote stay.
  h.view.pods_listed = false;
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(h.Patches("w1") == 0);

  h.view.pods_listed = true;
  h.view.pods["w1"] = {{"ns/a", kmodd::server::ModulePods{false, true}}};
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(h.LabelsOf("w1") == Labels{{"role", "worker"}, {kDraReadyA, ""}});

  h.Watched("w1");
  h.view.pods["w1"] = {{"ns/a", kmodd::server::ModulePods{true, false}}};
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(h.LabelsOf("w1") == Labels{{"role", "worker"}, {kPluginReadyA, ""}});

  h.Watched("w1");
  h.view.pods.clear();
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(h.LabelsOf("w1") == Labels{{"role", "worker"}});
  // No Node Event for these labels.
  CHECK(h.NodeEvents().empty());
}

TEST_CASE("node labeler: a DRA driver gets kmodd's .dra-target by the device plugin's rule") {
  Harness h;
  h.AddNode("w1", {{"role", "worker"}});
  const std::string text =
      "apiVersion: kmm.sigs.x-k8s.io/v1beta1\nkind: Module\nmetadata: {name: a, namespace: ns}\n"
      "spec:\n  selector: {role: worker}\n"
      "  dra: {driverName: gpu.example.com, container: {image: 'r/dra:1'}}\n";
  kmodd::api::Decoded d = kmodd::api::DecodeDocuments(text, "m.yaml");
  REQUIRE(d.errors.empty());
  h.view.plugin_modules = {d.modules[0].object};
  h.view.records["w1"] = Reported("w1", true, {});
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(h.LabelsOf("w1") ==
        Labels{{"role", "worker"}, {"kmm.node.kubernetes.io/ns.a.dra-target", ""}});
  // Draining (its driver about to change) or cordoned: off.
  h.Watched("w1");
  h.view.draining["w1"] = {"ns/a"};
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(h.LabelsOf("w1") == Labels{{"role", "worker"}});
  h.Watched("w1");
  h.view.draining.clear();
  h.view.nodes["w1"].unschedulable = true;
  CHECK(IsOk(h.labeler.Reconcile(h.view, "w1")));
  CHECK(h.LabelsOf("w1") == Labels{{"role", "worker"}});
}

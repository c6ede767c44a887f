#include "controller/server/status.h"

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "api/decode.h"

using kmodd::server::Aggregate;
using kmodd::server::ControllerStatus;
using kmodd::server::ModuleState;
using kmodd::server::NodeModuleStatus;
using kmodd::api::Phase;
using kmodd::server::NodeRecord;
using kmodd::server::ReportedModule;
using kmodd::server::StatusInput;

namespace {

kmodd::api::Module MakeModule(const std::string& name, const std::string& secret = "") {
  auto m = kmodd::api::DecodeModule(absl::StrCat(
      "apiVersion: kmm.sigs.x-k8s.io/v1beta1\nkind: Module\nmetadata: {name: ", name,
      ", namespace: demo}\nspec:\n  selector: {role: worker}\n",
      secret.empty() ? "" : absl::StrCat("  imageRepoSecret: {name: ", secret, "}\n"),
      "  moduleLoader:\n    container:\n"
      "      modprobe: {moduleName: m}\n      kernelMappings:\n"
      "        - {regexp: '^6\\.1\\.', containerImage: 'r/m:1'}\n"));
  REQUIRE(m.ok());
  return *m;
}

kmodd::api::Node MakeNode(const std::string& name, bool worker, const std::string& kernel) {
  kmodd::api::Node n;
  n.metadata.name = name;
  if (worker) {
    n.metadata.labels["role"] = "worker";
  }
  n.node_info.kernel_version = kernel;
  return n;
}

NodeRecord Record(const std::string& name, bool connected, std::vector<ReportedModule> mods = {}) {
  NodeRecord r;
  r.name = name;
  r.connected = connected;
  r.since_unix_ms = 1'700'000'000'000;
  r.modules = std::move(mods);
  return r;
}

ReportedModule Reported(Phase phase, const std::string& message = "") {
  return ReportedModule{"demo/a", phase, message, "sha256:abc", "", 1'700'000'001'000};
}

// The fleet: n1..n4 as named below, Module demo/a for workers on 6.1 kernels.
struct Fleet {
  std::vector<NodeRecord> records;
  std::string secret;  // demo/a's imageRepoSecret
  std::vector<kmodd::api::Diagnostic> errors;
  std::map<std::string, kmodd::server::PullSecretState> secrets;
  ControllerStatus Run() {
    auto r = kmodd::placement::PlaceOnce({MakeModule("a", secret)},
                                   {MakeNode("n1-loaded", true, "6.1.0-27-cloud-amd64"),
                                    MakeNode("n2-new", true, "6.1.0-27-cloud-amd64"),
                                    MakeNode("n3-other", false, "6.1.0-27-cloud-amd64"),
                                    MakeNode("n4-old-kernel", true, "5.14.0-427.el9")});
    StatusInput in;
    const kmodd::api::Module* a = r.nodes[0].skipped.empty() ? r.nodes[0].modules[0].module
                                                             : r.nodes[0].skipped[0].module;
    in.modules = {a};
    in.plans = r.nodes;
    for (const auto& rec : records) {
      in.nodes.push_back(&rec);
    }
    in.errors = errors;
    in.pull_secrets = secrets;
    in.run_id = "run1";
    in.now_unix_ms = 1'700'000'002'000;
    return Aggregate(in);
  }
};

const kmodd::server::Condition* Cond(const ModuleState& m, const std::string& type) {
  for (const auto& c : m.conditions) {
    if (c.type == type) {
      return &c;
    }
  }
  return nullptr;
}

const NodeModuleStatus* Row(const ModuleState& m, const std::string& node) {
  for (const auto& r : m.nodes) {
    if (r.node == node) {
      return &r;
    }
  }
  return nullptr;
}

}  // namespace

TEST_CASE("status counts matching, desired and available nodes as KMM's moduleLoader does") {
  Fleet f;
  f.records = {Record("n1-loaded", true, {Reported(Phase::kLoaded)}), Record("n2-new", true),
               Record("n3-other", true), Record("n4-old-kernel", true)};
  ControllerStatus s = f.Run();
  REQUIRE(s.modules.size() == 1);
  const ModuleState& a = s.modules[0];
  CHECK(a.module_loader.nodes_matching_selector_number == 3);
  CHECK(a.module_loader.desired_number == 2);
  CHECK(a.module_loader.available_number == 1);
  REQUIRE(a.nodes.size() == 3);  // n3 does not match, so has no row
  CHECK(*Row(a, "n1-loaded") ==
        NodeModuleStatus{"n1-loaded", Phase::kLoaded, "", "sha256:abc", 1'700'000'001'000, true});
  CHECK(Row(a, "n2-new")->phase == Phase::kPending);
  CHECK(Row(a, "n2-new")->message == "waiting for the agent's report");
  CHECK(Row(a, "n4-old-kernel")->skipped);
  CHECK(Row(a, "n4-old-kernel")->message.find("no kernel mapping matches kernel 5.14") == 0);
  CHECK(a.conditions[0].type == "Available");
  CHECK(a.conditions[0].status == "False");
  CHECK(a.conditions[0].message == "1 of 2 nodes have it loaded");
  CHECK(a.conditions[1].type == "Degraded");
  CHECK(a.conditions[1].status == "False");
}

TEST_CASE("nodesMatchingSelectorNumber counts the selected nodes a Module may run on") {
  // KMM counts nodes that match the selector and tolerate every NoSchedule and NoExecute
  // taint. kmodd takes a node out only for an untolerated NoExecute taint (a cordon keeps
  // the modules), so it counts the nodes that match and have no such taint.
  struct Row {
    const char* node;
    bool worker;
    std::vector<kmodd::api::Taint> taints;
    bool unschedulable;
    int matching;
  };
  const kmodd::api::Taint no_execute{"dedicated", "gpu", "NoExecute"};
  const kmodd::api::Taint tolerated{"example.com/drain", "", "NoExecute"};
  const kmodd::api::Taint no_schedule{"node.kubernetes.io/unschedulable", "", "NoSchedule"};
  for (const Row& row : std::vector<Row>{
           {"plain worker", true, {}, false, 1},
           {"other role", false, {}, false, 0},
           {"untolerated NoExecute taint", true, {no_execute}, false, 0},
           {"tolerated NoExecute taint", true, {tolerated}, false, 1},
           {"cordoned (NoSchedule taint, unschedulable)", true, {no_schedule}, true, 1},
       }) {
    INFO(row.node);
    kmodd::api::Module m = MakeModule("a");
    m.spec.tolerations.push_back({"example.com/drain", "Exists", "", "NoExecute", std::nullopt});
    kmodd::api::Node n = MakeNode("n", row.worker, "6.1.0-27-cloud-amd64");
    n.taints = row.taints;
    n.unschedulable = row.unschedulable;
    auto r = kmodd::placement::PlaceOnce({m}, {n});
    const kmodd::api::Module* planned = nullptr;
    for (const auto& dm : r.nodes[0].modules) {
      planned = dm.module;
    }
    for (const auto& s : r.nodes[0].skipped) {
      planned = s.module;
    }
    REQUIRE(planned != nullptr);
    StatusInput in;
    in.modules = {planned};
    in.plans = r.nodes;
    const ControllerStatus s = Aggregate(in);
    CHECK(s.modules[0].module_loader.nodes_matching_selector_number == row.matching);
    CHECK(s.modules[0].module_loader.desired_number == row.matching);
  }
}

TEST_CASE("status: a disconnected node keeps its last report but is not available") {
  Fleet f;
  f.records = {Record("n1-loaded", false, {Reported(Phase::kLoaded, "loaded in 12 ms")}),
               Record("n2-new", true, {Reported(Phase::kLoaded)})};
  ControllerStatus s = f.Run();
  const ModuleState& a = s.modules[0];
  CHECK(a.module_loader.desired_number == 2);
  CHECK(a.module_loader.available_number == 1);
  const NodeModuleStatus* n1 = Row(a, "n1-loaded");
  CHECK(n1->phase == Phase::kLoaded);
  CHECK_FALSE(n1->connected);
  CHECK(n1->message == "agent disconnected; last report: loaded in 12 ms");
}

TEST_CASE("status: a failed node makes the Module Degraded, naming the node") {
  Fleet f;
  f.records = {Record("n1-loaded", true, {Reported(Phase::kFailed, "Invalid module format")}),
               Record("n2-new", true, {Reported(Phase::kLoaded)})};
  ControllerStatus s = f.Run();
  const ModuleState& a = s.modules[0];
  CHECK(a.conditions[1].status == "True");
  CHECK(a.conditions[1].reason == "LoadFailed");
  CHECK(a.conditions[1].message == "n1-loaded: Invalid module format");
}

TEST_CASE("status: a node still unloading a Module it should not run shows it") {
  Fleet f;
  f.records = {Record("n3-other", true, {Reported(Phase::kUnloading, "module in use")})};
  ControllerStatus s = f.Run();
  const NodeModuleStatus* n3 = Row(s.modules[0], "n3-other");
  REQUIRE(n3 != nullptr);
  CHECK(n3->phase == Phase::kUnloading);
  CHECK(s.modules[0].module_loader.desired_number == 2);
}

TEST_CASE("status document reads back as written, rejected manifests included") {
  Fleet f;
  f.records = {Record("n1-loaded", true, {Reported(Phase::kLoaded)}), Record("n2-new", false)};
  ControllerStatus s = f.Run();
  s.errors.push_back(kmodd::api::Diagnostic{"/etc/kmodd/modules/bad.yaml", 12, "Module demo/b",
                                            "spec.selector", "expected a map"});
  kmodd::Value v = kmodd::server::ToValue(s);
  auto back = kmodd::server::ParseStatusDocument(kmodd::ToYaml(v));
  REQUIRE(back.ok());
  CHECK(kmodd::ToJson(*back) == kmodd::ToJson(v));
  const kmodd::Value& err = v.Find("errors")->AsList().at(0);
  CHECK(err.Find("file")->AsString() == "/etc/kmodd/modules/bad.yaml");
  CHECK(err.Find("field")->AsString() == "spec.selector");
  const kmodd::Value& loader =
      *v.Find("modules")->AsList().at(0).Find("status")->Find("moduleLoader");
  CHECK(loader.Find("desiredNumber")->AsInt() == 2);
}

TEST_CASE("status: a Module whose spec passed validation is Accepted") {
  Fleet f;
  ControllerStatus s = f.Run();
  const kmodd::server::Condition* c = Cond(s.modules[0], "Accepted");
  REQUIRE(c != nullptr);
  CHECK(*c == kmodd::server::Condition{"Accepted", "True", "Valid", "the spec passed validation"});
  CHECK(Cond(s.modules[0], "PullSecretResolved") == nullptr);  // it names no Secret
}

TEST_CASE("status: a rejected Module names its fields; one accepted before keeps that spec") {
  Fleet f;
  const std::string regexp = "spec.moduleLoader.container.kernelMappings[0].regexp";
  f.errors = {{"", 0, "Module demo/a", regexp, "\"(\" is not a valid regular expression"},
              {"", 0, "Module demo/a", "spec.selector", "required"},
              {"", 0, "Module demo/new", regexp, "bad"},
              {"/d/x.yaml", 3, "", "", "not YAML"}};
  ControllerStatus s = f.Run();
  REQUIRE(s.modules.size() == 2);
  // demo/a is in force at its last accepted spec: counted, planned, Accepted=False.
  const ModuleState& a = s.modules[0];
  CHECK(a.name == "a");
  CHECK(a.module_loader.desired_number == 2);
  CHECK(*Cond(a, "Accepted") ==
        kmodd::server::Condition{"Accepted", "False", "Invalid",
                                 regexp + ": \"(\" is not a valid regular expression; "
                                          "spec.selector: required; the last accepted spec "
                                          "stays in force until this is fixed"});
  // demo/new was never accepted: listed, so that its status can say why, with no counts.
  const ModuleState& fresh = s.modules[1];
  CHECK(fresh.namespace_ == "demo");
  CHECK(fresh.name == "new");
  CHECK(fresh.module_loader.nodes_matching_selector_number == 0);
  CHECK(fresh.module_loader.desired_number == 0);
  CHECK(fresh.nodes.empty());
  CHECK(Cond(fresh, "Accepted")->message ==
        regexp + ": bad; not planned on any node until this is fixed");
  CHECK(Cond(fresh, "Available")->reason == "NoTargetNodes");
}

TEST_CASE("status: a Module's pull Secret, once looked up, is reported by a condition") {
  Fleet f;
  f.secret = "pull";
  CHECK(Cond(f.Run().modules[0], "PullSecretResolved") == nullptr);  // not looked up
  f.secrets["demo/pull"] = {false, "NotFound", "Secret demo/pull (spec.imageRepoSecret) not found"};
  f.secrets["demo/other"] = {true, "", ""};
  CHECK(*Cond(f.Run().modules[0], "PullSecretResolved") ==
        kmodd::server::Condition{"PullSecretResolved", "False", "NotFound",
                                 "Secret demo/pull (spec.imageRepoSecret) not found"});
  f.secrets["demo/pull"] = {true, "", ""};
  const ControllerStatus found = f.Run();  // kept: Cond points into it
  const kmodd::server::Condition* c = Cond(found.modules[0], "PullSecretResolved");
  REQUIRE(c != nullptr);
  CHECK(c->status == "True");
  CHECK(c->reason == "Found");
}

TEST_CASE("status document says when this replica serves no agents or sends nothing") {
  Fleet f;
  ControllerStatus s = f.Run();
  CHECK(kmodd::server::ToValue(s).Find("active") == nullptr);
  s.active = false;
  s.serving = false;
  kmodd::Value v = kmodd::server::ToValue(s);
  CHECK_FALSE(v.Find("active")->AsBool());
  CHECK_FALSE(v.Find("serving")->AsBool());
}

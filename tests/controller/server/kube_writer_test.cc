#include "controller/server/kube_writer.h"

#include <catch2/catch.hpp>

#include <cstdio>

#include "common/json.h"
#include "controller/kube/fake_client.h"

using kmodd::Value;
using kmodd::server::DesiredLabels;
using kmodd::server::FinalizerAction;
using kmodd::server::IsOwnedLabel;
using kmodd::server::LabelPatch;
using kmodd::server::Labels;
using kmodd::server::NextFinalizerAction;
using kmodd::server::NodeRecord;
using kmodd::server::ReportedModule;
using kmodd::source::ModuleMeta;

namespace {

NodeRecord Record(std::vector<ReportedModule> modules) {
  NodeRecord r;
  r.name = "w1";
  r.connected = true;
  r.kernel_release = "6.1.0-27-cloud-amd64";
  r.modules = std::move(modules);
  return r;
}

}  // namespace

TEST_CASE("kmodd owns the KMM ready, version-ready and kernel labels, and no others") {
  struct Row {
    const char* key;
    bool owned;
  };
  for (const Row& row : std::vector<Row>{
           {"kmm.node.kubernetes.io/ns.a.ready", true},
           {"kmm.node.kubernetes.io/ns.a.version.ready", true},
           // written by earlier kmodd releases: still removed, never written
           {"kmm.node.kubernetes.io/kernel-version.full", true},
           {"kmm.node.kubernetes.io/version-module.ns.a", false},  // the user's
           {"kmm.node.kubernetes.io/ns.a.device-plugin-ready", false},
           {"example.com/ns.a.ready", false},
           {"role", false},
       }) {
    INFO(row.key);
    CHECK(IsOwnedLabel(row.key) == row.owned);
  }
}

TEST_CASE("a node is labelled ready only for the modules its agent reports Loaded") {
  const NodeRecord r = Record({{"ns/a", "Loaded", "", "", "", 0},
                               {"ns/b", "Loaded", "", "", "v2", 0},
                               {"ns/c", "Loading", "", "", "", 0},
                               {"ns/d", "Failed", "boom", "", "", 0}});
  CHECK(DesiredLabels(r) == Labels{
                                {"kmm.node.kubernetes.io/ns.a.ready", ""},
                                {"kmm.node.kubernetes.io/ns.b.ready", ""},
                                {"kmm.node.kubernetes.io/ns.b.version.ready", "v2"},
                            });
  CHECK(DesiredLabels(Record({})).empty());
}

TEST_CASE("a GKE node (kernel 6.1.90+) is labelled as any other: no kernel-version.full label") {
  // "+" is not valid in a label value, and KMM no longer writes this label at all.
  NodeRecord r = Record({{"ns/a", "Loaded", "", "", "", 0}});
  r.kernel_release = "6.1.90+";
  CHECK(DesiredLabels(r) == Labels{{"kmm.node.kubernetes.io/ns.a.ready", ""}});
  // The label an earlier kmodd wrote goes with the next patch.
  std::optional<Value> p =
      LabelPatch({{"kmm.node.kubernetes.io/kernel-version.full", "6.1.0-27-cloud-amd64"},
                  {"kmm.node.kubernetes.io/ns.a.ready", ""}},
                 DesiredLabels(r));
  REQUIRE(p);
  CHECK(kmodd::ToJsonLine(*p) ==
        R"({"metadata":{"labels":{"kmm.node.kubernetes.io/kernel-version.full":null}}})");
}

TEST_CASE("the label patch adds, changes and removes only kmodd's labels") {
  const Labels current{{"role", "worker"},
                       {"kmm.node.kubernetes.io/version-module.ns.b", "v2"},
                       {"kmm.node.kubernetes.io/ns.old.ready", ""},
                       {"kmm.node.kubernetes.io/ns.b.version.ready", "v1"}};
  const Labels desired{{"kmm.node.kubernetes.io/ns.a.ready", ""},
                       {"kmm.node.kubernetes.io/ns.b.version.ready", "v2"}};
  std::optional<Value> p = LabelPatch(current, desired);
  REQUIRE(p);
  CHECK(kmodd::ToJsonLine(*p) ==
        R"({"metadata":{"labels":{"kmm.node.kubernetes.io/ns.old.ready":null,)"
        R"("kmm.node.kubernetes.io/ns.a.ready":"","kmm.node.kubernetes.io/ns.b.version.ready":"v2"}}})");
  Labels after = current;
  after.erase("kmm.node.kubernetes.io/ns.old.ready");
  after.insert(desired.begin(), desired.end());
  after["kmm.node.kubernetes.io/ns.b.version.ready"] = "v2";
  CHECK_FALSE(LabelPatch(after, desired));
}

TEST_CASE("the finalizer is added to every Module and removed once no connected agent reports it") {
  ModuleMeta fresh{"ns", "a", "u1", "5", {}, false};
  ModuleMeta held{"ns", "a", "u1", "6", {"other.io/x", "kmodd.io/unload"}, false};
  ModuleMeta deleting = held;
  deleting.deleting = true;
  ModuleMeta released{"ns", "a", "u1", "8", {"other.io/x"}, true};
  CHECK(NextFinalizerAction(fresh, false) == FinalizerAction::kAdd);
  CHECK(NextFinalizerAction(held, true) == FinalizerAction::kNone);
  CHECK(NextFinalizerAction(deleting, true) == FinalizerAction::kNone);
  CHECK(NextFinalizerAction(deleting, false) == FinalizerAction::kRemove);
  CHECK(NextFinalizerAction(released, false) == FinalizerAction::kNone);

  CHECK(kmodd::ToJsonLine(FinalizerPatch(fresh, FinalizerAction::kAdd)) ==
        R"({"metadata":{"finalizers":["kmodd.io/unload"],"resourceVersion":"5"}})");
  CHECK(kmodd::ToJsonLine(FinalizerPatch(deleting, FinalizerAction::kRemove)) ==
        R"({"metadata":{"finalizers":["other.io/x"],"resourceVersion":"6"}})");
}

TEST_CASE("a finalizer patch computed from a stale Module is refused, not applied over a newer list") {
  kmodd::kube::FakeKubeClient api;
  const std::string coll = kmodd::kube::ResourcePath("kmm.sigs.x-k8s.io/v1beta1", "modules", "ns");
  auto created = api.Create(coll, Value(Value::Map{{"metadata", Value(Value::Map{{"name", "a"}})}}));
  REQUIRE(created.ok());
  ModuleMeta m{"ns", "a", "", kmodd::StringAt(*created, {"metadata", "resourceVersion"}), {}, false};
  const std::string path = coll + "/a";
  REQUIRE(api.MergePatch(path, FinalizerPatch(m, FinalizerAction::kAdd)).ok());
  // m is now stale: the same patch again is a conflict.
  CHECK(absl::IsAborted(api.MergePatch(path, FinalizerPatch(m, FinalizerAction::kAdd)).status()));
  auto now = api.Get(path);
  REQUIRE(now.ok());
  CHECK(kmodd::ToJsonLine(*kmodd::Lookup(*now, {"metadata", "finalizers"})) ==
        R"(["kmodd.io/unload"])");
}

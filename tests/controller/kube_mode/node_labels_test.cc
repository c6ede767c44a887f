#include "controller/kube_mode/node_labels.h"

#include <catch2/catch.hpp>

#include <regex>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "tests/fakes/fake_kube_client.h"

using kmodd::Value;
using kmodd::server::LabelRefusedEvent;
using kmodd::server::Labels;
using kmodd::server::LabelWrite;
using kmodd::server::ModuleOfLabel;
using kmodd::server::NodeEvent;
using kmodd::server::ReadyLabelEvents;
using kmodd::server::RefusedLabels;
using kmodd::server::WriteNodeLabels;

namespace {

// The fake API server, refusing a whole patch whose label value breaks the API server's
// rule, as the real one does (422 Invalid).
class LabelCheckingClient final : public kmodd::kube::KubeClient {
 public:
  absl::StatusOr<Value> Get(std::string_view path) override { return api.Get(path); }
  absl::StatusOr<kmodd::kube::ObjectList> List(std::string_view path,
                                               const kmodd::kube::ListOptions& o) override {
    return api.List(path, o);
  }
  absl::Status Watch(std::string_view path, const kmodd::kube::WatchOptions& o,
                     const kmodd::kube::WatchHandler& h) override {
    return api.Watch(path, o, h);
  }
  absl::StatusOr<Value> Create(std::string_view c, const Value& o) override {
    return api.Create(c, o);
  }
  absl::StatusOr<Value> Update(std::string_view path, const Value& o) override {
    return api.Update(path, o);
  }
  absl::StatusOr<Value> MergePatch(std::string_view path, const Value& patch) override {
    static const std::regex kValue("(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?");
    ++patches;
    if (const Value* labels = kmodd::Lookup(patch, {"metadata", "labels"})) {
      for (const auto& [k, v] : labels->AsMap()) {
        if (v.IsString() && (v.AsString().size() > 63 || !std::regex_match(v.AsString(), kValue))) {
          return absl::InvalidArgumentError(absl::StrCat(
              "PATCH ", std::string(path), ": 422 Invalid: metadata.labels: Invalid value: \"", v.AsString(),
              "\": a valid label must be an empty string or consist of alphanumeric characters"));
        }
      }
    }
    return api.MergePatch(path, patch);
  }
  absl::StatusOr<Value> Apply(std::string_view path, const Value& o,
                              const kmodd::kube::ApplyOptions& opt) override {
    return api.Apply(path, o, opt);
  }
  absl::Status Delete(std::string_view path) override { return api.Delete(path); }

  kmodd::kube::FakeKubeClient api;
  int patches = 0;
};

constexpr char kNodes[] = "/api/v1/nodes";

Labels NodeLabels(LabelCheckingClient& c) {
  auto n = c.api.Get(absl::StrCat(kNodes, "/w1"));
  REQUIRE(n.ok());
  Labels out;
  if (const Value* labels = kmodd::Lookup(*n, {"metadata", "labels"})) {
    for (const auto& [k, v] : labels->AsMap()) {
      out[k] = v.AsString();
    }
  }
  return out;
}

void CreateNode(LabelCheckingClient& c, const Labels& labels) {
  Value l = Value::EmptyMap();
  for (const auto& [k, v] : labels) {
    l.Set(k, v);
  }
  REQUIRE(c.api.Create(kNodes, Value(Value::Map{{"metadata", Value(Value::Map{{"name", "w1"},
                                                                             {"labels", l}})}}))
              .ok());
}

Value Patch(Value labels) {
  return Value(Value::Map{{"metadata", Value(Value::Map{{"labels", std::move(labels)}})}});
}

}  // namespace

TEST_CASE("a label the API server refuses holds back no other label of the Node") {
  LabelCheckingClient c;
  CreateNode(c, {{"role", "worker"}, {"kmm.node.kubernetes.io/ns.c.ready", ""}});
  Value labels = Value::EmptyMap();
  labels.Set("kmm.node.kubernetes.io/ns.c.ready", nullptr);
  labels.Set("kmm.node.kubernetes.io/ns.a.ready", "");
  labels.Set("kmm.node.kubernetes.io/ns.b.version.ready", "1.0+gke");
  const LabelWrite w = WriteNodeLabels(c, "w1", Patch(labels));
  CHECK(w.error.ok());
  REQUIRE(w.refused.size() == 1);
  CHECK(w.refused.begin()->first == "kmm.node.kubernetes.io/ns.b.version.ready");
  CHECK_THAT(w.refused.begin()->second, Catch::Contains("Invalid value: \"1.0+gke\""));
  CHECK(NodeLabels(c) == Labels{{"role", "worker"}, {"kmm.node.kubernetes.io/ns.a.ready", ""}});
}

TEST_CASE("a label patch the API server accepts is one write") {
  LabelCheckingClient c;
  CreateNode(c, {});
  Value labels = Value::EmptyMap();
  labels.Set("kmm.node.kubernetes.io/ns.a.ready", "");
  labels.Set("kmm.node.kubernetes.io/ns.a.version.ready", "v2");
  const LabelWrite w = WriteNodeLabels(c, "w1", Patch(labels));
  CHECK(w.error.ok());
  CHECK(w.refused.empty());
  CHECK(c.patches == 1);
  CHECK(NodeLabels(c).size() == 2);
}

TEST_CASE("a label write that fails for another reason is returned whole for a retry") {
  LabelCheckingClient c;
  CreateNode(c, {});
  c.api.FailNext(absl::UnavailableError("connection refused"));
  Value labels = Value::EmptyMap();
  labels.Set("kmm.node.kubernetes.io/ns.a.ready", "");
  labels.Set("kmm.node.kubernetes.io/ns.b.ready", "");
  const LabelWrite w = WriteNodeLabels(c, "w1", Patch(labels));
  CHECK(absl::IsUnavailable(w.error));
  CHECK(w.refused.empty());
  CHECK(c.patches == 1);
  CHECK(NodeLabels(c).empty());
}

TEST_CASE("a refused label is left out until its retry time or a new value, news once") {
  using std::chrono::seconds;
  RefusedLabels r;
  const auto t0 = RefusedLabels::Clock::time_point() + seconds(1000);
  const std::string a = "kmm.node.kubernetes.io/ns.a.ready";
  const std::string v = "kmm.node.kubernetes.io/ns.b.version.ready";
  CHECK(r.Refused("w1", v, "1.0+gke", t0));
  CHECK_FALSE(r.Refused("w1", v, "1.0+gke", t0));  // the same refusal again: no news

  Labels desired{{a, ""}, {v, "1.0+gke"}};
  r.Filter("w1", desired, t0 + seconds(1));
  CHECK(desired == Labels{{a, ""}});
  Labels other_node{{a, ""}, {v, "1.0+gke"}};
  r.Filter("w2", other_node, t0 + seconds(1));
  CHECK(other_node.size() == 2);

  Labels retry{{a, ""}, {v, "1.0+gke"}};
  r.Filter("w1", retry, t0 + RefusedLabels::kRetry);
  CHECK(retry.size() == 2);  // asked again, once per kRetry
  CHECK_FALSE(r.Refused("w1", v, "1.0+gke", t0 + RefusedLabels::kRetry));

  Labels changed{{v, "1.1"}};
  r.Filter("w1", changed, t0 + seconds(2));
  CHECK(changed.size() == 1);  // a new value is asked for at once...
  CHECK(r.Refused("w1", v, "1.1", t0 + seconds(2)));  // ...and its refusal is news

  r.Accepted("w1", {{v, "1.1"}});
  CHECK(r.Refused("w1", v, "1.1", t0 + seconds(3)));  // accepted in between: news again
}

TEST_CASE("ModuleOfLabel names the Module of its .ready and .version.ready labels only") {
  struct Row {
    const char* key;
    const char* module;
  };
  for (const Row& row : std::vector<Row>{
           {"kmm.node.kubernetes.io/ns.a.ready", "ns/a"},
           {"kmm.node.kubernetes.io/ns.a.version.ready", "ns/a"},
           {"kmm.node.kubernetes.io/ns.my.dotted.mod.ready", "ns/my.dotted.mod"},
           {"kmm.node.kubernetes.io/ns.a.device-plugin-ready", ""},
           {"kmm.node.kubernetes.io/version-module.ns.a", ""},
           {"kmm.node.kubernetes.io/kernel-version.full", ""},
           {"example.com/ns.a.ready", ""},
       }) {
    INFO(row.key);
    CHECK(ModuleOfLabel(row.key) == row.module);
  }
}

TEST_CASE("the Node Events for .ready labels are KMM's, with its module annotation") {
  const Labels before{{"role", "worker"},
                      {"kmm.node.kubernetes.io/ns.old.ready", ""},
                      {"kmm.node.kubernetes.io/ns.b.ready", ""}};
  const Labels after{{"role", "worker"},
                     {"kmm.node.kubernetes.io/ns.b.ready", ""},
                     {"kmm.node.kubernetes.io/ns.a.ready", ""},
                     {"kmm.node.kubernetes.io/ns.a.version.ready", "v2"}};
  const std::vector<NodeEvent> events = ReadyLabelEvents(before, after);
  REQUIRE(events.size() == 2);
  CHECK(events[0].type == "Normal");
  CHECK(events[0].reason == "ModuleLoaded");
  CHECK(events[0].message == "Module ns/a loaded into the kernel");
  CHECK(events[0].annotations == std::map<std::string, std::string>{{"module", "ns/a"}});
  CHECK(events[1].type == "Normal");
  CHECK(events[1].reason == "ModuleUnloaded");
  CHECK(events[1].message == "Module ns/old unloaded from the kernel");
  CHECK(events[1].annotations == std::map<std::string, std::string>{{"module", "ns/old"}});
  CHECK(ReadyLabelEvents(after, after).empty());
}

TEST_CASE("a refused label's Warning Event names the label, the value and the reason") {
  const NodeEvent e =
      LabelRefusedEvent("kmm.node.kubernetes.io/ns.b.version.ready", "1.0+gke", "422 Invalid");
  CHECK(e.type == "Warning");
  CHECK(e.reason == "NodeLabelRefused");
  CHECK_THAT(e.message, Catch::Contains("kmm.node.kubernetes.io/ns.b.version.ready=1.0+gke"));
  CHECK_THAT(e.message, Catch::Contains("422 Invalid"));
  CHECK(e.annotations == std::map<std::string, std::string>{{"module", "ns/b"}});
}

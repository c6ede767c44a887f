#include "controller/kube_mode/module_status_writer.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <string>

#include "common/json.h"
#include "fake_writer_view.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/fake_kube_client.h"

using kmodd::Value;
using kmodd::server::ModuleState;
using kmodd::server::ModuleStatusWriter;

namespace {

const std::string kModules = kmodd::kube::ResourcePath("kmm.sigs.x-k8s.io/v1beta1", "modules", "ns");

struct Harness {
  Harness()
      : devnull(std::fopen("/dev/null", "w")),
        log(devnull),
        events(api, clock, "kmm", "test"),
        writer(api, events, log) {
    auto created =
        api.Create(kModules, Value(Value::Map{{"metadata", Value(Value::Map{{"name", "a"}})}}));
    REQUIRE(created.ok());
    view.metas["ns/a"] = kmodd::source::ModuleMetaFromObject(*created);
  }
  ~Harness() { std::fclose(devnull); }

  std::string StatusJson() {
    auto m = api.Get(kModules + "/a");
    REQUIRE(m.ok());
    const Value* s = m->Find("status");
    return s == nullptr ? "null" : kmodd::ToJsonLine(*s);
  }
  size_t Writes() {
    size_t n = 0;
    for (const std::string& call : api.calls()) {
      n += call.find(kModules + "/a/status") != std::string::npos ? 1 : 0;
    }
    return n;
  }
  // "<reason> x<count>" of each Warning about the Module.
  std::vector<std::string> Warnings() {
    std::vector<std::string> out;
    for (const auto& [name, e] : api.Objects(kmodd::kube::ResourcePath("v1", "events", "ns"))) {
      out.push_back(kmodd::StringAt(e, {"reason"}) + " x" +
                    std::to_string(kmodd::IntAt(e, {"count"})));
    }
    return out;
  }

  std::FILE* devnull;
  kmodd::Logger log;
  kmodd::kube::FakeKubeClient api;
  kmodd::FakeClock clock;
  kmodd::kube::EventRecorder events;
  kmodd::testing::FakeWriterView view;
  ModuleStatusWriter writer;
};

ModuleState Rejected(int32_t matching) {
  ModuleState m;
  m.namespace_ = "ns";
  m.name = "a";
  m.module_loader = {matching, 0, 0};
  m.conditions = {{"Accepted", "False", "Invalid", "spec.selector: required"}};
  return m;
}

}  // namespace

TEST_CASE("module status: written in the status document's shape, again only when it changes") {
  Harness h;
  h.view.modules["ns/a"] = Rejected(1);
  CHECK(h.writer.Reconcile(h.view, "ns/a").error.ok());
  CHECK(h.StatusJson() == kmodd::ToJsonLine(kmodd::server::ModuleStatusValue(Rejected(1))));
  const size_t writes = h.Writes();
  CHECK(writes > 0);
  CHECK(h.writer.Reconcile(h.view, "ns/a").error.ok());
  CHECK(h.Writes() == writes);  // unchanged: not written

  h.view.modules["ns/a"] = Rejected(2);
  CHECK(h.writer.Reconcile(h.view, "ns/a").error.ok());
  CHECK(h.StatusJson() == kmodd::ToJsonLine(kmodd::server::ModuleStatusValue(Rejected(2))));
  // One Warning for the one problem, however often the status changes.
  CHECK(h.Warnings() == std::vector<std::string>{"Rejected x1"});

  // A resync writes it again (someone may have changed it), without a second Warning.
  h.writer.Rewrite();
  const size_t before = h.Writes();
  CHECK(h.writer.Reconcile(h.view, "ns/a").error.ok());
  CHECK(h.Writes() > before);
  CHECK(h.Warnings() == std::vector<std::string>{"Rejected x1"});
}

TEST_CASE("module status: a failed write is an error for the queue, then written; a deleted Module is not") {
  Harness h;
  h.view.modules["ns/a"] = Rejected(1);
  h.api.FailNext(absl::UnavailableError("the API server is away"));
  CHECK(absl::IsUnavailable(h.writer.Reconcile(h.view, "ns/a").error));
  CHECK(h.writer.Reconcile(h.view, "ns/a").error.ok());
  CHECK(h.StatusJson() == kmodd::ToJsonLine(kmodd::server::ModuleStatusValue(Rejected(1))));

  REQUIRE(h.api.Delete(kModules + "/a").ok());
  h.view.modules["ns/a"] = Rejected(3);
  CHECK(h.writer.Reconcile(h.view, "ns/a").error.ok());
}

TEST_CASE("module status: an Event per rollout step and per failed node - each once") {
  Harness h;
  ModuleState m;
  m.namespace_ = "ns";
  m.name = "a";
  kmodd::server::RolloutState r;
  r.policy = "ns/p";
  r.revision = "rev1";
  r.phase = "Progressing";
  r.message = "canaries: 0 of 2 Ready";
  m.rollout = r;
  h.view.modules["ns/a"] = m;
  CHECK(h.writer.Reconcile(h.view, "ns/a").error.ok());
  CHECK(h.writer.Reconcile(h.view, "ns/a").error.ok());  // the same step: no second Event
  m.rollout->phase = "Halted";
  m.rollout->message = "canary n0 Failed: halted";
  m.rollout->failed_nodes = {"n0: vermagic mismatch"};
  h.view.modules["ns/a"] = m;
  CHECK(h.writer.Reconcile(h.view, "ns/a").error.ok());
  m.rollout->failed_nodes = {"n0: vermagic mismatch", "n1: probe failed"};
  h.view.modules["ns/a"] = m;
  CHECK(h.writer.Reconcile(h.view, "ns/a").error.ok());
  std::vector<std::string> events = h.Warnings();
  std::sort(events.begin(), events.end());
  CHECK(events == std::vector<std::string>{"RolloutHalted x1", "RolloutNodeFailed x1",
                                           "RolloutNodeFailed x1", "RolloutProgressing x1"});
  // The status carries the rollout too.
  CHECK(h.StatusJson().find(R"("rollout":{"policy":"ns/p","revision":"rev1","phase":"Halted")") !=
        std::string::npos);
}

#include "controller/kube_mode/finalizer_writer.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "common/json.h"
#include "fake_writer_view.h"
#include "tests/fakes/fake_kube_client.h"

using kmodd::Value;
using kmodd::server::FinalizerWriter;

namespace {

const std::string kModules = kmodd::kube::ResourcePath("kmm.sigs.x-k8s.io/v1beta1", "modules", "ns");

struct Harness {
  Harness()
      : devnull(std::fopen("/dev/null", "w")),
        log(devnull),
        writer(api, [this](const std::string& key) { released.push_back(key); }, log) {
    REQUIRE(api.Create(kModules, Value(Value::Map{{"metadata", Value(Value::Map{{"name", "a"}})}}))
                .ok());
    Watch(true);
  }
  ~Harness() { std::fclose(devnull); }

  // The Module as the watch brings it.
  void Watch(bool planned) {
    auto m = api.Get(kModules + "/a");
    REQUIRE(m.ok());
    view.metas["ns/a"] = kmodd::source::ModuleMetaFromObject(*m);
    view.metas["ns/a"].planned = planned;
  }
  std::string Finalizers() {
    auto m = api.Get(kModules + "/a");
    REQUIRE(m.ok());
    const Value* f = kmodd::Lookup(*m, {"metadata", "finalizers"});
    return f == nullptr ? "null" : kmodd::ToJsonLine(*f);
  }

  std::FILE* devnull;
  kmodd::Logger log;
  kmodd::kube::FakeKubeClient api;
  kmodd::testing::FakeWriterView view;
  std::vector<std::string> released;
  FinalizerWriter writer;
};

}  // namespace

TEST_CASE("finalizer: on a planned Module; on deletion, disconnected agents do not hold it") {
  Harness h;
  CHECK(h.writer.Reconcile(h.view, "ns/a").error.ok());
  CHECK(h.Finalizers() == R"(["kmodd.io/unload"])");

  // Deleted while a connected agent still reports it: it stays.
  REQUIRE(h.api.MergePatch(kModules + "/a", *kmodd::ParseJson(
                                                R"({"metadata":{"deletionTimestamp":"2026-01-01T00:00:00Z"}})"))
              .ok());
  h.Watch(false);
  h.view.reported.insert("ns/a");
  CHECK(h.writer.Reconcile(h.view, "ns/a").error.ok());
  CHECK(h.Finalizers() == R"(["kmodd.io/unload"])");
  CHECK(h.released.empty());

  // That agent disconnects (its last report still names the Module): released.
  h.view.reported.clear();
  CHECK(h.writer.Reconcile(h.view, "ns/a").error.ok());
  CHECK(h.Finalizers() == "[]");
  CHECK(h.released == std::vector<std::string>{"ns/a"});
}

TEST_CASE("finalizer: a patch from a Module the watch has not caught up with is a conflict, retried") {
  Harness h;
  // Someone else writes the Module after the watch saw it.
  REQUIRE(h.api.MergePatch(kModules + "/a", *kmodd::ParseJson(R"({"metadata":{"labels":{"x":"y"}}})"))
              .ok());
  CHECK(absl::IsAborted(h.writer.Reconcile(h.view, "ns/a").error));
  CHECK(h.Finalizers() == "null");
  h.Watch(true);
  CHECK(h.writer.Reconcile(h.view, "ns/a").error.ok());
  CHECK(h.Finalizers() == R"(["kmodd.io/unload"])");
}

#include <catch2/catch.hpp>

#include <string>

#include "tests/fakes/fake_clock.h"
#include "common/json.h"
#include "controller/kube/events.h"
#include "tests/fakes/fake_kube_client.h"

namespace kmodd::kube {
namespace {

ObjectReference ModuleRef() {
  return {"kmm.sigs.x-k8s.io/v1beta1", "Module", "kmm", "intel-dgpu", "uid-7"};
}

TEST_CASE("An Event names its object, reason, type and source in the object's namespace") {
  FakeKubeClient client;
  FakeClock clock(absl::FromUnixSeconds(1700000000));
  EventRecorder recorder(client, clock, "kmodd-controller", "pod-1");
  REQUIRE(recorder.Record(ModuleRef(), kEventWarning, "LoadFailed", "node n1: vermagic").ok());
  const auto events = client.Objects("/api/v1/namespaces/kmm/events");
  REQUIRE(events.size() == 1);
  const Value& e = events.begin()->second;
  CHECK_THAT(events.begin()->first, Catch::StartsWith("intel-dgpu."));
  CHECK(StringAt(e, {"involvedObject", "kind"}) == "Module");
  CHECK(StringAt(e, {"involvedObject", "apiVersion"}) == "kmm.sigs.x-k8s.io/v1beta1");
  CHECK(StringAt(e, {"involvedObject", "namespace"}) == "kmm");
  CHECK(StringAt(e, {"involvedObject", "name"}) == "intel-dgpu");
  CHECK(StringAt(e, {"involvedObject", "uid"}) == "uid-7");
  CHECK(StringAt(e, {"type"}) == "Warning");
  CHECK(StringAt(e, {"reason"}) == "LoadFailed");
  CHECK(StringAt(e, {"message"}) == "node n1: vermagic");
  CHECK(StringAt(e, {"source", "component"}) == "kmodd-controller");
  CHECK(StringAt(e, {"reportingInstance"}) == "pod-1");
  CHECK(StringAt(e, {"firstTimestamp"}) == "2023-11-14T22:13:20Z");
  CHECK(IntAt(e, {"count"}) == 1);
}

TEST_CASE("A repeated Event raises the count of the first instead of adding another") {
  FakeKubeClient client;
  FakeClock clock(absl::FromUnixSeconds(1700000000));
  EventRecorder recorder(client, clock, "kmodd-controller", "pod-1");
  REQUIRE(recorder.Record(ModuleRef(), kEventNormal, "Loaded", "on n1").ok());
  clock.Advance(absl::Seconds(30));
  REQUIRE(recorder.Record(ModuleRef(), kEventNormal, "Loaded", "on n1").ok());
  REQUIRE(recorder.Record(ModuleRef(), kEventNormal, "Loaded", "on n2").ok());
  const auto events = client.Objects("/api/v1/namespaces/kmm/events");
  REQUIRE(events.size() == 2);
  int found = 0;
  for (const auto& [name, e] : events) {
    if (StringAt(e, {"message"}) == "on n1") {
      ++found;
      CHECK(IntAt(e, {"count"}) == 2);
      CHECK(StringAt(e, {"firstTimestamp"}) == "2023-11-14T22:13:20Z");
      CHECK(StringAt(e, {"lastTimestamp"}) == "2023-11-14T22:13:50Z");
    }
  }
  CHECK(found == 1);
}

TEST_CASE("An Event that expired is made again; cluster-scoped objects report to default") {
  FakeKubeClient client;
  FakeClock clock;
  EventRecorder recorder(client, clock, "kmodd-controller", "pod-1");
  const ObjectReference node{"v1", "Node", "", "n1", "uid-n1"};
  REQUIRE(recorder.Record(node, kEventNormal, "ModuleLoaded", "x").ok());
  auto events = client.Objects("/api/v1/namespaces/default/events");
  REQUIRE(events.size() == 1);
  CHECK(Lookup(events.begin()->second, {"involvedObject", "namespace"}) == nullptr);
  REQUIRE(client.Delete("/api/v1/namespaces/default/events/" + events.begin()->first).ok());
  REQUIRE(recorder.Record(node, kEventNormal, "ModuleLoaded", "x").ok());
  events = client.Objects("/api/v1/namespaces/default/events");
  REQUIRE(events.size() == 1);
  CHECK(IntAt(events.begin()->second, {"count"}) == 1);
}

TEST_CASE("An Event carries its annotations, and KMM's source when kmodd writes as kmm") {
  FakeKubeClient client;
  FakeClock clock;
  EventRecorder recorder(client, clock, "kmm", "pod-1");
  const ObjectReference node{"v1", "Node", "", "n1", "uid-n1"};
  REQUIRE(recorder
              .Record(node, kEventNormal, "ModuleLoaded", "Module ns/a loaded into the kernel",
                      {{"module", "ns/a"}})
              .ok());
  const auto events = client.Objects("/api/v1/namespaces/default/events");
  REQUIRE(events.size() == 1);
  const Value& e = events.begin()->second;
  CHECK(StringAt(e, {"metadata", "annotations", "module"}) == "ns/a");
  CHECK(StringAt(e, {"source", "component"}) == "kmm");
  CHECK(StringAt(e, {"reportingComponent"}) == "kmm");
  // The same Event about another Module is another Event, not a count on this one.
  REQUIRE(recorder
              .Record(node, kEventNormal, "ModuleLoaded", "Module ns/a loaded into the kernel",
                      {{"module", "ns/b"}})
              .ok());
  CHECK(client.Objects("/api/v1/namespaces/default/events").size() == 2);
}

TEST_CASE("An Event that cannot be written is an error for the caller to log") {
  FakeKubeClient client;
  FakeClock clock;
  EventRecorder recorder(client, clock, "kmodd-controller", "pod-1");
  client.FailNext(absl::PermissionDeniedError("403 Forbidden"));
  CHECK(recorder.Record(ModuleRef(), kEventNormal, "Loaded", "x").code() ==
        absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace kmodd::kube

#include <catch2/catch.hpp>

#include <atomic>
#include <string>
#include <thread>

#include "tests/fakes/fake_clock.h"
#include "common/json.h"
#include "tests/fakes/fake_kube_client.h"
#include "controller/kube/leader.h"

namespace kmodd::kube {
namespace {

constexpr char kLease[] = "/apis/coordination.k8s.io/v1/namespaces/kmm/leases/kmodd";

struct Replica {
  Replica(FakeKubeClient& client, const Clock& clock, const std::string& id) {
    LeaderElectionConfig config;
    config.lease_namespace = "kmm";
    config.lease_name = "kmodd";
    config.identity = id;
    config.on_started_leading = [this] { ++started; };
    config.on_stopped_leading = [this] { ++stopped; };
    elector = std::make_unique<LeaderElector>(client, config, clock);
  }
  int started = 0;
  int stopped = 0;
  std::unique_ptr<LeaderElector> elector;
};

Value Spec(FakeKubeClient& client) {
  auto lease = client.Get(kLease);
  REQUIRE(lease.ok());
  return *lease->Find("spec");
}

TEST_CASE("The first replica creates the lease and leads with client-go's timings") {
  FakeKubeClient client;
  FakeClock clock(absl::FromUnixMicros(1700000000123456));
  Replica a(client, clock, "a");
  CHECK(a.elector->Step().ok());
  CHECK(a.elector->IsLeader());
  CHECK(a.started == 1);
  const Value spec = Spec(client);
  CHECK(StringAt(spec, {"holderIdentity"}) == "a");
  CHECK(IntAt(spec, {"leaseDurationSeconds"}) == 15);
  CHECK(StringAt(spec, {"acquireTime"}) == "2023-11-14T22:13:20.123456Z");
  CHECK(StringAt(spec, {"renewTime"}) == "2023-11-14T22:13:20.123456Z");
  CHECK(IntAt(spec, {"leaseTransitions"}) == 0);

  clock.Advance(absl::Seconds(2));
  CHECK(a.elector->Step().ok());
  CHECK(a.started == 1);  // renewing does not start again
  CHECK(StringAt(Spec(client), {"renewTime"}) == "2023-11-14T22:13:22.123456Z");
  CHECK(StringAt(Spec(client), {"acquireTime"}) == "2023-11-14T22:13:20.123456Z");
}

TEST_CASE("A second replica waits out the lease duration on its own clock, then takes over") {
  FakeKubeClient client;
  FakeClock clock;
  Replica a(client, clock, "a");
  Replica b(client, clock, "b");
  REQUIRE(a.elector->Step().ok());
  CHECK(b.elector->Step().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(b.elector->observed_holder() == "a");
  CHECK_FALSE(b.elector->IsLeader());

  // a renews: b's 15 s count starts again from when it saw the renewal.
  clock.Advance(absl::Seconds(10));
  REQUIRE(a.elector->Step().ok());
  clock.Advance(absl::Seconds(2));
  CHECK_FALSE(b.elector->Step().ok());
  clock.Advance(absl::Seconds(14));
  CHECK_FALSE(b.elector->Step().ok());  // 14 s since b saw a change

  // a is gone (no more renewals). a's own view: leadership ends at the renew deadline,
  // before b may take over.
  CHECK_FALSE(a.elector->IsLeader());
  clock.Advance(absl::Seconds(1));
  CHECK(b.elector->Step().ok());
  CHECK(b.elector->IsLeader());
  CHECK(b.started == 1);
  CHECK(StringAt(Spec(client), {"holderIdentity"}) == "b");
  CHECK(IntAt(Spec(client), {"leaseTransitions"}) == 1);

  // a comes back: it sees b renewing and does not lead; it had stopped leading.
  CHECK_FALSE(a.elector->Step().ok());
  CHECK(a.stopped == 1);
  CHECK_FALSE(a.elector->IsLeader());
}

TEST_CASE("A leader whose renewals fail stops leading once the renew deadline passes") {
  FakeKubeClient client;
  FakeClock clock;
  Replica a(client, clock, "a");
  REQUIRE(a.elector->Step().ok());
  for (int i = 1; i <= 4; ++i) {
    clock.Advance(absl::Seconds(2));
    client.FailNext(absl::UnavailableError("apiserver down"));
    CHECK_FALSE(a.elector->Step().ok());
    CHECK(a.elector->IsLeader());  // 8 s since the last renew: still within 10 s
    CHECK(a.stopped == 0);
  }
  clock.Advance(absl::Seconds(2));
  client.FailNext(absl::UnavailableError("apiserver down"));
  CHECK_FALSE(a.elector->Step().ok());
  CHECK_FALSE(a.elector->IsLeader());
  CHECK(a.stopped == 1);

  // The lease is still a's: the next successful attempt leads again.
  clock.Advance(absl::Seconds(2));
  CHECK(a.elector->Step().ok());
  CHECK(a.started == 2);
  CHECK(IntAt(Spec(client), {"leaseTransitions"}) == 0);
}

TEST_CASE("IsLeader turns false at the renew deadline even before the next Step") {
  FakeKubeClient client;
  FakeClock clock;
  Replica a(client, clock, "a");
  REQUIRE(a.elector->Step().ok());
  clock.Advance(absl::Seconds(9));
  CHECK(a.elector->IsLeader());
  clock.Advance(absl::Seconds(1));
  CHECK_FALSE(a.elector->IsLeader());
}

TEST_CASE("A lost race (409 Conflict) is retried at the next period, not taken as leading") {
  FakeKubeClient client;
  FakeClock clock;
  Replica a(client, clock, "a");
  Replica b(client, clock, "b");
  REQUIRE(a.elector->Step().ok());
  REQUIRE(a.elector->Release().ok());
  // b read the released lease, but a wrote it again before b's update.
  client.FailNext(absl::OkStatus());  // b's GET
  client.FailNext(absl::AbortedError("409 Conflict"));
  CHECK(b.elector->Step().code() == absl::StatusCode::kAborted);
  CHECK_FALSE(b.elector->IsLeader());
  CHECK(b.started == 0);
  CHECK(b.elector->Step().ok());
  CHECK(b.elector->IsLeader());
}

TEST_CASE("A stale resourceVersion makes the lease update conflict in the fake too") {
  FakeKubeClient client;
  FakeClock clock;
  Replica a(client, clock, "a");
  REQUIRE(a.elector->Step().ok());
  auto lease = client.Get(kLease);
  REQUIRE(lease.ok());
  REQUIRE(client.MergePatch(kLease, *ParseJson(R"({"metadata":{"labels":{"x":"y"}}})")).ok());
  CHECK(client.Update(kLease, *lease).status().code() == absl::StatusCode::kAborted);
}

TEST_CASE("A released lease is taken at once by the next replica") {
  FakeKubeClient client;
  FakeClock clock;
  Replica a(client, clock, "a");
  Replica b(client, clock, "b");
  REQUIRE(a.elector->Step().ok());
  REQUIRE(b.elector->Step().code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE(a.elector->Release().ok());
  CHECK(StringAt(Spec(client), {"holderIdentity"}).empty());
  CHECK(IntAt(Spec(client), {"leaseDurationSeconds"}) == 1);
  CHECK(b.elector->Step().ok());
  CHECK(b.elector->IsLeader());
  // Release by a non-holder changes nothing.
  REQUIRE(a.elector->Release().ok());
  CHECK(StringAt(Spec(client), {"holderIdentity"}) == "b");
}

TEST_CASE("Run leads until stopped, then releases the lease and says so") {
  FakeKubeClient client;
  RealClock clock;
  LeaderElectionConfig config;
  config.lease_namespace = "kmm";
  config.lease_name = "kmodd";
  config.identity = "a";
  config.retry_period = absl::Milliseconds(5);
  std::atomic<int> started{0};
  std::atomic<int> stopped{0};
  http::Cancellation stop;
  config.on_started_leading = [&] {
    ++started;
    stop.Cancel();
  };
  config.on_stopped_leading = [&] { ++stopped; };
  LeaderElector elector(client, config, clock);
  elector.Run(stop);
  CHECK(started == 1);
  CHECK(stopped == 1);
  CHECK(StringAt(Spec(client), {"holderIdentity"}).empty());
}

TEST_CASE("Run renews once per retry period of the injected clock, not of the wall clock") {
  FakeKubeClient client;
  FakeClock clock(absl::FromUnixMicros(1700000000000000));
  LeaderElectionConfig config;
  config.lease_namespace = "kmm";
  config.lease_name = "kmodd";
  config.identity = "a";
  http::Cancellation stop;
  LeaderElector elector(client, config, clock);
  std::thread runner([&] { elector.Run(stop); });
  REQUIRE(clock.AwaitWaiters(1));  // led, and waits for the next renewal
  CHECK(elector.IsLeader());
  CHECK(StringAt(Spec(client), {"renewTime"}) == "2023-11-14T22:13:20.000000Z");
  clock.Advance(absl::Seconds(2));
  // The renewal, then the next wait.
  while (StringAt(Spec(client), {"renewTime"}) != "2023-11-14T22:13:22.000000Z") {
    std::this_thread::yield();
  }
  REQUIRE(clock.AwaitWaiters(1));
  stop.Cancel();
  runner.join();
  CHECK(StringAt(Spec(client), {"holderIdentity"}).empty());
}

}  // namespace
}  // namespace kmodd::kube

// Against a real kube-apiserver (tools/kube/start): hidden from the unit run by the [.kube]
// tag; tests/controller/kube/kube_test.sh starts the server and runs these, and they fail,
// never skip, when KMODD_KUBE_KUBECONFIG is not set.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "controller/kube/events.h"
#include "controller/kube/leader.h"
#include "controller/kube/list_watch.h"
#include "controller/kube/rest_client.h"
#include "tests/eventually.h"

namespace kmodd::kube {
namespace {

using ::kmodd::testing::Eventually;

const Clock& RealClockRef() {
  static const RealClock clock;
  return clock;
}

std::unique_ptr<RestKubeClient> Connect() {
  const char* path = std::getenv("KMODD_KUBE_KUBECONFIG");
  INFO("KMODD_KUBE_KUBECONFIG must name the harness's kubeconfig (tools/kube/start)");
  REQUIRE(path != nullptr);
  auto config = LoadKubeconfig(path);
  REQUIRE(config.status().ToString() == "OK");
  auto client = RestKubeClient::Create(*config, RealClockRef());
  REQUIRE(client.status().ToString() == "OK");
  return *std::move(client);
}

// A name no earlier run used: the harness keeps etcd data between runs.
std::string Unique(const std::string& prefix) {
  return absl::StrCat(prefix, "-", getpid(), "-",
                      std::chrono::steady_clock::now().time_since_epoch().count() % 1000000007);
}

Value J(const std::string& text) {
  auto v = ParseJson(text);
  REQUIRE(v.status().ToString() == "OK");
  return *v;
}

Value ConfigMap(const std::string& name, const std::string& data) {
  return J(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")" + name +
           R"("},"data":)" + data + "}");
}

TEST_CASE("kube: list and watch a ConfigMap through create, patch and delete", "[.kube]") {
  auto client = Connect();
  const std::string name = Unique("lw");
  const std::string cms = ResourcePath("v1", "configmaps", "default");
  std::mutex mu;
  std::vector<std::string> seen;
  ListWatchOptions options;
  options.path = cms;
  options.field_selector = "metadata.name=" + name;
  options.watch_timeout = std::chrono::seconds(30);
  ListWatchCallbacks callbacks;
  callbacks.on_sync = [&](const std::vector<Value>& objects) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(absl::StrCat("sync:", objects.size()));
  };
  callbacks.on_event = [&](EventType type, const Value& object) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(absl::StrCat(static_cast<int>(type), ":", StringAt(object, {"data", "k"})));
  };
  ListWatch informer(*client, options, callbacks, RealClockRef());
  http::Cancellation stop;
  std::thread runner([&] { informer.Run(stop); });
  auto count = [&](size_t n) {
    return [&, n] {
      std::lock_guard<std::mutex> lock(mu);
      return seen.size() >= n;
    };
  };
  REQUIRE(Eventually(count(1), std::chrono::seconds(20)));
  REQUIRE(client->Create(cms, ConfigMap(name, R"({"k":"1"})")).ok());
  REQUIRE(client->MergePatch(cms + "/" + name, J(R"({"data":{"k":"2"}})")).ok());
  REQUIRE(client->Delete(cms + "/" + name).ok());
  REQUIRE(Eventually(count(4), std::chrono::seconds(20)));
  stop.Cancel();
  runner.join();
  std::lock_guard<std::mutex> lock(mu);
  CHECK(seen == std::vector<std::string>{"sync:0", "0:1", "1:2", "2:2"});
  CHECK(client->Get(cms + "/" + name).status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("kube: server-side apply, field ownership conflicts, and stale updates", "[.kube]") {
  auto client = Connect();
  const std::string name = Unique("apply");
  const std::string path = ResourcePath("v1", "configmaps", "default", name);
  auto applied = client->Apply(path, ConfigMap(name, R"({"a":"1"})"), {"kmodd", false});
  REQUIRE(applied.status().ToString() == "OK");
  CHECK(StringAt(*applied, {"data", "a"}) == "1");
  // Another manager changing a field kmodd owns: 409 Conflict without force.
  auto conflict = client->Apply(path, ConfigMap(name, R"({"a":"2"})"), {"other", false});
  CHECK(conflict.status().code() == absl::StatusCode::kAborted);
  auto forced = client->Apply(path, ConfigMap(name, R"({"a":"2"})"), {"other", true});
  REQUIRE(forced.status().ToString() == "OK");
  CHECK(StringAt(*forced, {"data", "a"}) == "2");

  // An update over an old resourceVersion conflicts; RetryOnConflict re-reads and wins.
  CHECK(client->Update(path, *applied).status().code() == absl::StatusCode::kAborted);
  CHECK(RetryOnConflict([&] {
          auto current = client->Get(path);
          if (!current.ok()) {
            return current.status();
          }
          return client->Update(path, With(*current, "data", J(R"({"a":"3"})"))).status();
        }).ok());
  CHECK(StringAt(*client->Get(path), {"data", "a"}) == "3");
  CHECK(client->Create(ResourcePath("v1", "configmaps", "default"), ConfigMap(name, "{}"))
            .status()
            .code() == absl::StatusCode::kAlreadyExists);

  EventRecorder recorder(*client, RealClockRef(), "kmodd-test", "itest");
  const ObjectReference ref{"v1", "ConfigMap", "default", name, StringAt(*applied, {"metadata", "uid"})};
  REQUIRE(recorder.Record(ref, kEventNormal, "Tested", "twice").ok());
  REQUIRE(recorder.Record(ref, kEventNormal, "Tested", "twice").ok());
  auto events = client->List(ResourcePath("v1", "events", "default"),
                             {"", "involvedObject.name=" + name, 0, ""});
  REQUIRE(events.status().ToString() == "OK");
  REQUIRE(events->items.size() == 1);
  CHECK(IntAt(events->items[0], {"count"}) == 2);
  REQUIRE(client->Delete(path).ok());
}

TEST_CASE("kube: two electors share one Lease", "[.kube]") {
  auto client = Connect();
  const std::string lease = Unique("lease");
  auto config = [&](const std::string& id) {
    LeaderElectionConfig c;
    c.lease_namespace = "default";
    c.lease_name = lease;
    c.identity = id;
    c.lease_duration = absl::Seconds(1);
    c.renew_deadline = absl::Milliseconds(800);
    c.retry_period = absl::Milliseconds(100);
    return c;
  };
  LeaderElector a(*client, config("a"), RealClockRef());
  LeaderElector b(*client, config("b"), RealClockRef());
  REQUIRE(a.Step().ok());
  CHECK(a.IsLeader());
  CHECK(b.Step().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_FALSE(b.IsLeader());
  REQUIRE(a.Release().ok());
  REQUIRE(b.Step().ok());
  CHECK(b.IsLeader());
  // b stops renewing: a takes over once a second has passed on its own clock.
  CHECK_FALSE(a.Step().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  CHECK(a.Step().ok());
  CHECK(a.IsLeader());
  auto spec = client->Get(ResourcePath("coordination.k8s.io/v1", "leases", "default", lease));
  REQUIRE(spec.ok());
  CHECK(StringAt(*spec, {"spec", "holderIdentity"}) == "a");
  CHECK(IntAt(*spec, {"spec", "leaseTransitions"}) == 2);
}

}  // namespace
}  // namespace kmodd::kube

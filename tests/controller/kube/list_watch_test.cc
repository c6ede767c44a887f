#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/http/beast_client.h"
#include "common/json.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/fake_kube_client.h"
#include "controller/kube/list_watch.h"
#include "controller/kube/rest_client.h"
#include "tests/common/http/test_server.h"
#include "tests/eventually.h"

namespace kmodd::kube {
namespace {

using http::testing::Canned;
using http::testing::ChunkedReply;
using http::testing::Received;
using http::testing::Reply;
using http::testing::TestServer;
using ::kmodd::testing::Eventually;

std::string Item(const std::string& name, int rv) {
  return R"({"metadata":{"name":")" + name + R"(","resourceVersion":")" + std::to_string(rv) +
         R"("}})";
}

std::string List(const std::vector<std::string>& items, int rv, const std::string& cont = "") {
  std::string out = R"({"kind":"ConfigMapList","metadata":{"resourceVersion":")" +
                    std::to_string(rv) + R"(")" + (cont.empty() ? "" : R"(,"continue":")" + cont + "\"") +
                    R"(},"items":[)";
  for (size_t i = 0; i < items.size(); ++i) {
    out += (i ? "," : "") + items[i];
  }
  return out + "]}";
}

std::string Event(const std::string& type, const std::string& object) {
  return R"({"type":")" + type + R"(","object":)" + object + "}\n";
}

constexpr char kGone[] =
    R"({"kind":"Status","status":"Failure","reason":"Expired","code":410,"message":"too old"})";

Canned Hang() {
  Canned c;
  c.pieces = {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"};
  c.hang = true;
  return c;
}

// What a ListWatch delivered, as text.
struct Seen {
  std::mutex mu;
  std::vector<std::string> log;
  void Add(std::string s) {
    std::lock_guard<std::mutex> lock(mu);
    log.push_back(std::move(s));
  }
};

ListWatchCallbacks Record(Seen& seen) {
  ListWatchCallbacks cb;
  cb.on_sync = [&seen](const std::vector<Value>& objects) {
    std::string names;
    for (const Value& o : objects) {
      names += StringAt(o, {"metadata", "name"});
    }
    seen.Add("sync:" + names);
  };
  cb.on_event = [&seen](EventType type, const Value& o) {
    const char* names[] = {"added", "modified", "deleted", "bookmark"};
    seen.Add(std::string(names[static_cast<int>(type)]) + ":" + StringAt(o, {"metadata", "name"}));
  };
  cb.on_error = [&seen](const absl::Status& st) {
    seen.Add("error:" + std::string(absl::StatusCodeToString(st.code())));
  };
  return cb;
}

ListWatchOptions FastOptions(const std::string& path) {
  ListWatchOptions options;
  options.path = path;
  options.page_size = 0;
  options.initial_backoff = std::chrono::milliseconds(1);
  options.max_backoff = std::chrono::milliseconds(4);
  options.min_watch_duration = std::chrono::milliseconds(0);
  options.seed = 1;
  return options;
}

// What the list-watch loop does happens on its own thread: wait for it, bounded.
constexpr std::chrono::seconds kWait(20);

TEST_CASE("ListWatch lists, watches from the list, follows bookmarks, relists on 410") {
  const std::vector<Canned> script = {
      Reply(200, List({Item("a", 5), Item("b", 6)}, 10)),
      ChunkedReply({Event("ADDED", Item("c", 11)),
                    Event("BOOKMARK", R"({"metadata":{"resourceVersion":"20"}})")}),
      ChunkedReply({Event("MODIFIED", Item("c", 21)), Event("ERROR", kGone)}),
      Reply(200, List({Item("a", 5), Item("c", 21)}, 30)),
      Reply(503, "try later"),
      Reply(410, kGone),
      Reply(200, List({Item("c", 21)}, 40)),
      ChunkedReply({Event("DELETED", Item("c", 41))}),
      Hang(),
  };
  std::atomic<size_t> served{0};
  TestServer server([&](const Received&) {
    const size_t i = served++;
    return i < script.size() ? script[i] : Hang();
  });
  KubeConfig config;
  config.server = server.Url("");
  RealClock clock;
  RestKubeClient client(config, *http::BeastHttpClient::Create(http::ClientOptions{}), clock);
  Seen seen;
  ListWatch informer(client, FastOptions("/api/v1/namespaces/ns/configmaps"), Record(seen), clock);
  http::Cancellation stop;
  std::thread runner([&] { informer.Run(stop); });
  REQUIRE(Eventually([&] { return served >= script.size(); }, kWait));
  stop.Cancel();
  runner.join();

  std::vector<std::string> targets;
  for (const Received& r : server.received()) {
    std::string t = r.target;
    const size_t timeout = t.find("&timeoutSeconds=");
    targets.push_back(timeout == std::string::npos ? t : t.substr(0, timeout));
  }
  const std::string cms = "/api/v1/namespaces/ns/configmaps";
  const std::string watch = cms + "?watch=1&allowWatchBookmarks=true&resourceVersion=";
  CHECK(targets == std::vector<std::string>{cms, watch + "10", watch + "20", cms, watch + "30",
                                            watch + "30", cms, watch + "40", watch + "41"});
  CHECK(seen.log == std::vector<std::string>{"sync:ab", "added:c", "modified:c",
                                             "error:OUT_OF_RANGE", "sync:ac",
                                             "error:UNAVAILABLE", "error:OUT_OF_RANGE", "sync:c",
                                             "deleted:c"});
}

TEST_CASE("ListWatch reads every page of a list before it syncs") {
  const std::vector<Canned> script = {
      Reply(200, List({Item("a", 5)}, 10, "page2")),
      Reply(200, List({Item("b", 6)}, 10)),
      Hang(),
  };
  std::atomic<size_t> served{0};
  TestServer server([&](const Received&) {
    const size_t i = served++;
    return i < script.size() ? script[i] : Hang();
  });
  KubeConfig config;
  config.server = server.Url("");
  RealClock clock;
  RestKubeClient client(config, *http::BeastHttpClient::Create(http::ClientOptions{}), clock);
  Seen seen;
  ListWatchOptions options = FastOptions("/api/v1/nodes");
  options.page_size = 1;
  ListWatch informer(client, options, Record(seen), clock);
  http::Cancellation stop;
  std::thread runner([&] { informer.Run(stop); });
  REQUIRE(Eventually([&] { return served >= 3; }, kWait));
  stop.Cancel();
  runner.join();
  const auto got = server.received();
  CHECK(got[0].target == "/api/v1/nodes?limit=1");
  CHECK(got[1].target == "/api/v1/nodes?limit=1&continue=page2");
  CHECK_THAT(got[2].target, Catch::StartsWith("/api/v1/nodes?watch=1&allowWatchBookmarks=true"
                                              "&resourceVersion=10&timeoutSeconds="));
  CHECK(seen.log == std::vector<std::string>{"sync:ab"});
}

TEST_CASE("ListWatch over the fake client sees writes, and relists after compaction") {
  FakeKubeClient fake;
  const std::string cms = ResourcePath("v1", "configmaps", "ns");
  auto make = [](const std::string& name) {
    Value metadata;
    metadata.Set("name", name);
    Value o;
    o.Set("metadata", metadata);
    return o;
  };
  REQUIRE(fake.Create(cms, make("a")).ok());
  Seen seen;
  RealClock clock;
  ListWatch informer(fake, FastOptions(cms), Record(seen), clock);
  http::Cancellation stop;
  std::thread runner([&] { informer.Run(stop); });
  auto logged = [&](size_t n) {
    return [&seen, n] {
      std::lock_guard<std::mutex> lock(seen.mu);
      return seen.log.size() >= n;
    };
  };
  REQUIRE(Eventually(logged(1), kWait));
  REQUIRE(fake.Create(cms, make("b")).ok());
  REQUIRE(Eventually(logged(2), kWait));
  fake.Compact();
  REQUIRE(Eventually(logged(3), kWait));
  REQUIRE(fake.Delete(cms + "/a").ok());
  REQUIRE(Eventually(logged(4), kWait));
  stop.Cancel();
  runner.join();
  std::lock_guard<std::mutex> lock(seen.mu);
  CHECK(seen.log == std::vector<std::string>{"sync:a", "added:b", "error:OUT_OF_RANGE",
                                             "sync:ab", "deleted:a"});
}

TEST_CASE("ListWatch waits its backoff after an error on the injected clock") {
  FakeKubeClient fake;
  const std::string cms = ResourcePath("v1", "configmaps", "ns");
  Seen seen;
  ListWatchOptions options = FastOptions(cms);
  options.initial_backoff = std::chrono::seconds(8);
  options.max_backoff = std::chrono::seconds(8);
  fake.FailNext(absl::UnavailableError("the API server is away"));
  FakeClock clock;
  ListWatch informer(fake, options, Record(seen), clock);
  http::Cancellation stop;
  std::thread runner([&] { informer.Run(stop); });
  REQUIRE(clock.AwaitWaiters(1));  // the failed list, then the backoff
  {
    std::lock_guard<std::mutex> lock(seen.mu);
    CHECK(seen.log == std::vector<std::string>{"error:UNAVAILABLE"});
  }
  clock.Advance(std::chrono::seconds(8));  // at most the backoff: the list comes next
  REQUIRE(Eventually(
      [&] {
        std::lock_guard<std::mutex> lock(seen.mu);
        return seen.log.size() >= 2;
      },
      kWait));
  stop.Cancel();
  runner.join();
  std::lock_guard<std::mutex> lock(seen.mu);
  CHECK(seen.log == std::vector<std::string>{"error:UNAVAILABLE", "sync:"});
}

}  // namespace
}  // namespace kmodd::kube

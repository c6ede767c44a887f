#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "tests/fakes/fake_clock.h"
#include "common/http/beast_client.h"
#include "common/json.h"
#include "controller/kube/rest_client.h"
#include "tests/common/http/test_server.h"
#include "tests/temp_dir.h"

namespace kmodd::kube {
namespace {

using http::testing::Canned;
using http::testing::ChunkedReply;
using http::testing::Received;
using http::testing::Reply;
using http::testing::TestServer;

std::unique_ptr<RestKubeClient> NewClient(const TestServer& server, const Clock& clock,
                                          const std::string& token = "t0ken") {
  KubeConfig config;
  config.server = server.Url("/");
  config.token = token;
  auto http = http::BeastHttpClient::Create(http::ClientOptions{});
  REQUIRE(http.ok());
  return std::make_unique<RestKubeClient>(config, *std::move(http), clock);
}

Value Obj(const std::string& json) {
  auto v = ParseJson(json);
  REQUIRE(v.ok());
  return *v;
}

std::string Status(int code, const std::string& reason, const std::string& message) {
  return R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":")" + message +
         R"(","reason":")" + reason + R"(","code":)" + std::to_string(code) + "}";
}

constexpr char kCm[] = R"({"kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"5"}})";

TEST_CASE("Each verb sends the method, path, content type, token and body Kubernetes expects") {
  RealClock clock;
  TestServer server([](const Received&) { return Reply(200, kCm); });
  auto client = NewClient(server, clock);
  const std::string cms = ResourcePath("v1", "configmaps", "ns1");
  const std::string cm = ResourcePath("v1", "configmaps", "ns1", "a");
  const Value body = Obj(R"({"data":{"k":"v"}})");

  REQUIRE(client->Get(cm).ok());
  REQUIRE(client->Create(cms, body).ok());
  REQUIRE(client->Update(cm, body).ok());
  REQUIRE(client->MergePatch(cm, body).ok());
  REQUIRE(client->Apply(cm, body, {"kmodd", true}).ok());
  REQUIRE(client->Apply(cm, body, {"kmodd", false}).ok());
  REQUIRE(UpdateStatus(*client, cm, Obj(R"({"phase":"Ready"})")).ok());
  REQUIRE(client->Delete(cm).ok());
  CHECK(client->Apply(cm, body, {"", false}).status().code() ==
        absl::StatusCode::kInvalidArgument);

  struct Want {
    std::string method;
    std::string target;
    std::string content_type;
    std::string body;
  };
  const std::string json = R"({"data":{"k":"v"}})";
  const std::vector<Want> want = {
      {"GET", "/api/v1/namespaces/ns1/configmaps/a", "", ""},
      {"POST", "/api/v1/namespaces/ns1/configmaps", "application/json", json},
      {"PUT", "/api/v1/namespaces/ns1/configmaps/a", "application/json", json},
      {"PATCH", "/api/v1/namespaces/ns1/configmaps/a", "application/merge-patch+json", json},
      {"PATCH", "/api/v1/namespaces/ns1/configmaps/a?fieldManager=kmodd&force=true",
       "application/apply-patch+yaml", json},
      {"PATCH", "/api/v1/namespaces/ns1/configmaps/a?fieldManager=kmodd",
       "application/apply-patch+yaml", json},
      {"PATCH", "/api/v1/namespaces/ns1/configmaps/a/status", "application/merge-patch+json",
       R"({"status":{"phase":"Ready"}})"},
      {"DELETE", "/api/v1/namespaces/ns1/configmaps/a", "", ""},
  };
  const std::vector<Received> got = server.received();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO(want[i].method << " " << want[i].target);
    CHECK(got[i].method == want[i].method);
    CHECK(got[i].target == want[i].target);
    CHECK(got[i].headers.Get("Content-Type").value_or("") == want[i].content_type);
    CHECK(got[i].body == want[i].body);
    CHECK(got[i].headers.Get("Authorization").value_or("") == "Bearer t0ken");
    CHECK(got[i].headers.Get("Accept").value_or("") == "application/json");
  }
}

TEST_CASE("Create's client sends one call after another over one connection") {
  RealClock clock;
  TestServer server([](const Received&) { return Reply(200, kCm); });
  KubeConfig config;
  config.server = server.Url("/");
  config.token = "t0ken";
  auto client = RestKubeClient::Create(config, clock);
  REQUIRE(client.ok());
  const std::string cm = ResourcePath("v1", "configmaps", "ns1", "a");
  const Value body = Obj(R"({"data":{"k":"v"}})");
  REQUIRE((*client)->Get(cm).ok());
  REQUIRE((*client)->MergePatch(cm, body).ok());
  REQUIRE((*client)->Create(ResourcePath("v1", "configmaps", "ns1"), body).ok());
  REQUIRE((*client)->Get(cm).ok());
  CHECK(server.received().size() == 4);
  CHECK(server.accepted() == 1);
}

TEST_CASE("List returns items, resourceVersion and continue, with escaped selectors") {
  RealClock clock;
  TestServer server([](const Received&) {
    return Reply(200, R"({"kind":"NodeList","metadata":{"resourceVersion":"42","continue":"c1"},)"
                      R"("items":[{"metadata":{"name":"n1"}},{"metadata":{"name":"n2"}}]})");
  });
  auto client = NewClient(server, clock);
  ListOptions options;
  options.label_selector = "kmm.node/x=y,env in (a b)";
  options.limit = 500;
  options.continue_token = "c0";
  auto list = client->List(ResourcePath("v1", "nodes"), options);
  REQUIRE(list.status().ToString() == "OK");
  CHECK(list->resource_version == "42");
  CHECK(list->continue_token == "c1");
  REQUIRE(list->items.size() == 2);
  CHECK(StringAt(list->items[1], {"metadata", "name"}) == "n2");
  CHECK(server.received()[0].target ==
        "/api/v1/nodes?labelSelector=kmm.node%2Fx%3Dy%2Cenv%20in%20%28a%20b%29&limit=500"
        "&continue=c0");
}

TEST_CASE("API errors map to codes by what the caller should do, with the server's message") {
  struct Row {
    int status;
    std::string body;
    absl::StatusCode code;
    std::string message;
  };
  const std::vector<Row> rows = {
      {409, Status(409, "Conflict", "the object has been modified"), absl::StatusCode::kAborted,
       "PUT /api/v1/namespaces/ns/configmaps/a: 409 Conflict: the object has been modified"},
      {409, Status(409, "AlreadyExists", "exists"), absl::StatusCode::kAlreadyExists, "exists"},
      {404, Status(404, "NotFound", "configmaps \\\"a\\\" not found"),
       absl::StatusCode::kNotFound, "configmaps \"a\" not found"},
      {410, Status(410, "Expired", "too old resource version"), absl::StatusCode::kOutOfRange,
       "410 Expired"},
      {422, Status(422, "Invalid", "bad name"), absl::StatusCode::kInvalidArgument, "bad name"},
      {403, Status(403, "Forbidden", "no"), absl::StatusCode::kPermissionDenied, "Forbidden"},
      {401, "Unauthorized", absl::StatusCode::kUnauthenticated, "401: Unauthorized"},
      {429, "slow down", absl::StatusCode::kUnavailable, "slow down"},
      {503, "<html>", absl::StatusCode::kUnavailable, "<html>"},
  };
  for (const Row& row : rows) {
    INFO(row.status << " " << row.body);
    RealClock clock;
    TestServer server([&row](const Received&) { return Reply(row.status, row.body); });
    auto client = NewClient(server, clock);
    auto result = client->Update(ResourcePath("v1", "configmaps", "ns", "a"), Obj(kCm));
    CHECK(result.status().code() == row.code);
    CHECK_THAT(std::string(result.status().message()), Catch::Contains(row.message));
  }
}

TEST_CASE("A token file is sent as the bearer token and re-read after a 401") {
  const kmodd::testing::TempDir dir("kube-token");
  const std::string file = dir.Write("token", "old\n");
  KubeConfig config;
  int calls = 0;
  TestServer server([&calls](const Received&) {
    return ++calls == 1 ? Reply(401, "Unauthorized") : Reply(200, kCm);
  });
  config.server = server.Url("");
  config.token_file = file;
  FakeClock clock;
  RestKubeClient client(config, *http::BeastHttpClient::Create(http::ClientOptions{}), clock);
  CHECK(client.Get("/api/v1/namespaces/a/configmaps/a").status().code() ==
        absl::StatusCode::kUnauthenticated);
  { std::ofstream(file) << "new\n"; }
  CHECK(client.Get("/api/v1/namespaces/a/configmaps/a").ok());
  const auto got = server.received();
  REQUIRE(got.size() == 2);
  CHECK(got[0].headers.Get("Authorization") == "Bearer old");
  CHECK(got[1].headers.Get("Authorization") == "Bearer new");
}

const std::string& Events() {
  static const std::string events =
      R"({"type":"ADDED","object":{"kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"11"},"data":{"x":"}{\"é"}}})"
      "\n"
      R"({"type":"MODIFIED","object":{"kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"12"}}})"
      "\n"
      R"({"type":"BOOKMARK","object":{"kind":"ConfigMap","metadata":{"resourceVersion":"15"}}})"
      "\n"
      R"({"type":"DELETED","object":{"kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"16"}}})"
      "\n";
  return events;
}

std::vector<std::string> Describe(const std::vector<WatchEvent>& events) {
  std::vector<std::string> out;
  out.reserve(events.size());
  for (const WatchEvent& e : events) {
    out.push_back(std::to_string(static_cast<int>(e.type)) + ":" +
                  StringAt(e.object, {"metadata", "resourceVersion"}));
  }
  return out;
}

TEST_CASE("Watch asks for bookmarks from a resourceVersion and decodes every event") {
  RealClock clock;
  TestServer server([](const Received&) { return ChunkedReply({Events()}); });
  auto client = NewClient(server, clock);
  WatchOptions options;
  options.resource_version = "10";
  options.timeout = std::chrono::seconds(290);
  options.label_selector = "a=b";
  std::vector<WatchEvent> events;
  const absl::Status st =
      client->Watch(ResourcePath("v1", "configmaps", "ns"), options, [&](const WatchEvent& e) {
        events.push_back(e);
        return absl::OkStatus();
      });
  REQUIRE(st.ToString() == "OK");
  CHECK(Describe(events) == std::vector<std::string>{"0:11", "1:12", "3:15", "2:16"});
  CHECK(StringAt(events[0].object, {"data", "x"}) == "}{\"é");
  CHECK(server.received()[0].target ==
        "/api/v1/namespaces/ns/configmaps?watch=1&allowWatchBookmarks=true&resourceVersion=10"
        "&timeoutSeconds=290&labelSelector=a%3Db");
}

TEST_CASE("Watch decodes events split across chunk boundaries at every byte offset") {
  RealClock clock;
  size_t cut = 0;
  TestServer server([&cut](const Received&) {
    return ChunkedReply({Events().substr(0, cut), Events().substr(cut)},
                        std::chrono::milliseconds(0));
  });
  auto client = NewClient(server, clock);
  for (cut = 1; cut < Events().size(); ++cut) {
    INFO("cut at " << cut);
    std::vector<WatchEvent> events;
    const absl::Status st = client->Watch("/api/v1/configmaps", WatchOptions{},
                                          [&](const WatchEvent& e) {
                                            events.push_back(e);
                                            return absl::OkStatus();
                                          });
    REQUIRE(st.ToString() == "OK");
    REQUIRE(Describe(events) == std::vector<std::string>{"0:11", "1:12", "3:15", "2:16"});
  }
}

TEST_CASE("Watch reports 410 Gone as OutOfRange, as an HTTP status or as an ERROR event") {
  RealClock clock;
  const std::string gone = Status(410, "Expired", "too old resource version: 1 (5)");
  bool as_event = false;
  TestServer server([&](const Received&) {
    if (as_event) {
      return ChunkedReply({R"({"type":"ADDED","object":{"metadata":{"resourceVersion":"2"}}})"
                           "\n",
                           R"({"type":"ERROR","object":)" + gone + "}\n"});
    }
    return Reply(410, gone);
  });
  auto client = NewClient(server, clock);
  int delivered = 0;
  auto count = [&delivered](const WatchEvent&) {
    ++delivered;
    return absl::OkStatus();
  };
  absl::Status http_gone = client->Watch("/api/v1/configmaps", WatchOptions{}, count);
  CHECK(http_gone.code() == absl::StatusCode::kOutOfRange);
  CHECK_THAT(std::string(http_gone.message()), Catch::Contains("too old resource version"));
  as_event = true;
  absl::Status event_gone = client->Watch("/api/v1/configmaps", WatchOptions{}, count);
  CHECK(event_gone.code() == absl::StatusCode::kOutOfRange);
  CHECK_THAT(std::string(event_gone.message()), Catch::Contains("410 Expired"));
  CHECK(delivered == 1);
}

TEST_CASE("Watch fails on a stream cut inside an event, and on a handler's error") {
  RealClock clock;
  bool cut = true;
  TestServer server([&cut](const Received&) {
    return cut ? ChunkedReply({R"({"type":"ADDED","object":{"metadata":)"})
               : ChunkedReply({Events()});
  });
  auto client = NewClient(server, clock);
  auto ok = [](const WatchEvent&) { return absl::OkStatus(); };
  CHECK(client->Watch("/api/v1/configmaps", WatchOptions{}, ok).code() ==
        absl::StatusCode::kUnavailable);
  cut = false;
  auto refuse = [](const WatchEvent&) { return absl::InternalError("consumer broke"); };
  CHECK(client->Watch("/api/v1/configmaps", WatchOptions{}, refuse).code() ==
        absl::StatusCode::kInternal);
}

TEST_CASE("Watch ends with Cancelled when its cancellation fires during silence") {
  RealClock clock;
  TestServer server([](const Received&) {
    Canned c = ChunkedReply({Events().substr(0, Events().find('\n') + 1)});
    c.pieces.pop_back();  // no end of body: the server stays silent
    c.hang = true;
    return c;
  });
  auto client = NewClient(server, clock);
  http::Cancellation cancel;
  WatchOptions options;
  options.cancel = &cancel;
  int delivered = 0;
  const absl::Status st = client->Watch("/api/v1/configmaps", options, [&](const WatchEvent&) {
    ++delivered;
    cancel.Cancel();  // from the handler here; any thread may
    return absl::OkStatus();
  });
  CHECK(st.code() == absl::StatusCode::kCancelled);
  CHECK(delivered == 1);
}

}  // namespace
}  // namespace kmodd::kube

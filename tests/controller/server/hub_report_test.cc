// What the Hub takes from a node's report: only what concerns that node (planned for it,
// sent to it, reported by it before, or possibly sent by an earlier controller run), within
// the caps of one report. The Hub is the code under test; streams are fakes.

#include <catch2/catch.hpp>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/decode.h"
#include "controller/server/hub.h"
#include "controller/kube_mode/kube_writer.h"
#include "controller/server/status.h"
#include "hub_fixtures.h"
#include "tests/fakes/fake_clock.h"

using kmodd::server::AgentStream;
using kmodd::server::Hub;
using kmodd::source::ModuleChanges;
using kmodd::source::SourceUpdate;
using kmodd::testing::FakeStream;

namespace {

// Module demo/<name>, image r/<name>:1.
kmodd::api::Module MakeModule(const std::string& name) {
  return kmodd::testing::MakeModule(name, absl::StrCat("r/", name, ":1"));
}

SourceUpdate Set(std::vector<std::string> names) {
  SourceUpdate u;
  u.errors_hold_all = false;
  ModuleChanges c;
  for (const auto& n : names) {
    c.set.push_back(MakeModule(n));
  }
  u.changes.push_back(std::move(c));
  return u;
}

kmodd::v1::NodeInfo Info(const std::string& name, bool worker) {
  kmodd::v1::NodeInfo i;
  i.set_name(name);
  i.set_kernel_release("6.1.0-27-cloud-amd64");
  if (worker) {
    (*i.mutable_labels())["role"] = "worker";
  }
  return i;
}

// A report listing demo/<name> for each name, in `phase`, saying `message`.
kmodd::v1::NodeReport Report(const std::vector<std::string>& names,
                             kmodd::v1::Phase phase = kmodd::v1::LOADED,
                             const std::string& message = "") {
  kmodd::v1::NodeReport r;
  for (const auto& n : names) {
    auto* m = r.add_modules();
    m->set_namespace_("demo");
    m->set_name(n);
    m->set_phase(phase);
    m->set_message(message);
  }
  return r;
}

std::vector<std::string> ReportedKeys(Hub& hub, const std::string& node) {
  std::vector<std::string> out;
  const std::optional<kmodd::server::NodeRecord> rec = hub.Node(node);
  REQUIRE(rec);
  for (const auto& m : rec->modules) {
    out.push_back(m.key);
  }
  return out;
}

// The status rows of Module demo/<name>, as "node=phase:message".
std::vector<std::string> Rows(Hub& hub, const std::string& name) {
  std::vector<std::string> out;
  for (const auto& m : hub.Status().modules) {
    if (m.name == name) {
      for (const auto& r : m.nodes) {
        out.push_back(absl::StrCat(r.node, "=", kmodd::server::RowPhase(r), ":", r.message));
      }
    }
  }
  return out;
}

struct Harness {
  explicit Harness(kmodd::server::HubOptions options = {"run", std::chrono::minutes(10)})
      : log_file(std::tmpfile()), log(log_file), hub(options, clock, log) {}
  ~Harness() { std::fclose(log_file); }
  // How many lines of the log contain `text`.
  int LogLines(const std::string& text) {
    std::fflush(log_file);
    std::rewind(log_file);
    int n = 0;
    char line[8192];
    while (std::fgets(line, sizeof line, log_file) != nullptr) {
      n += std::string(line).find(text) != std::string::npos ? 1 : 0;
    }
    std::fseek(log_file, 0, SEEK_END);
    return n;
  }
  void Connect(FakeStream& s, const std::string& node, bool worker,
               kmodd::v1::NodeReport hello = {}) {
    *hello.mutable_node() = Info(node, worker);
    REQUIRE(hub.Hello(&s, hello.node()).ok());  // as SyncServer does: Hello, then Report
    REQUIRE(hub.Report(&s, hello).ok());
  }
  std::FILE* log_file;
  kmodd::Logger log;
  kmodd::FakeClock clock{absl::FromUnixMillis(1'000'000)};
  Hub hub;
};

constexpr char kIgnoredLog[] = "agent reported modules that are not its node's";

}  // namespace

TEST_CASE("hub: a node reporting a Module it is not planned for, or none at all, changes nothing") {
  Harness h;
  h.hub.ApplySource(Set({"a"}));
  FakeStream worker, other;
  h.Connect(worker, "w1", true, Report({"a"}));
  // "other" is no worker: a is not for it. It claims a, with a message of its choosing, and
  // a Module that does not exist.
  h.Connect(other, "other", false, Report({"a", "ghost"}, kmodd::v1::FAILED, "pwned"));

  CHECK(Rows(h.hub, "a") == std::vector<std::string>{"w1=Loaded:"});
  CHECK(ReportedKeys(h.hub, "other").empty());
  CHECK(h.hub.Node("other")->ignored_modules == 2);
  CHECK(kmodd::server::DesiredLabels(*h.hub.Node("other")).empty());  // no ready label
  const auto status = h.hub.Status();
  REQUIRE(status.modules.size() == 1);
  CHECK(status.modules[0].module_loader.available_number == 1);
  CHECK(status.modules[0].conditions[1].status == "False");  // Degraded: not by "other"
  CHECK(h.LogLines(kIgnoredLog) == 1);
  CHECK(h.LogLines(R"("examples":"demo/a, demo/ghost")") == 1);
  CHECK(kmodd::ToJsonLine(kmodd::server::ToValue(status)).find(R"("ignoredModules":2)") !=
        std::string::npos);
}

TEST_CASE("hub: a node keeps reporting a Module it was sent while it unloads it") {
  Harness h;
  h.hub.ApplySource(Set({"a", "b"}));
  FakeStream s;
  h.Connect(s, "w1", true);  // its hello lists nothing yet; it was sent a and b
  REQUIRE(h.hub.Report(&s, Report({"a", "b"}, kmodd::v1::LOADING)).ok());
  CHECK(ReportedKeys(h.hub, "w1") == std::vector<std::string>{"demo/a", "demo/b"});

  // b is removed from the Modules: the node unloads it, and says so until it is gone.
  SourceUpdate removed;
  removed.errors_hold_all = false;
  removed.changes.push_back(ModuleChanges{{}, {"demo/b"}});
  h.hub.ApplySource(removed);
  REQUIRE(h.hub.Report(&s, Report({"a", "b"}, kmodd::v1::UNLOADING)).ok());
  CHECK(ReportedKeys(h.hub, "w1") == std::vector<std::string>{"demo/a", "demo/b"});
  REQUIRE(h.hub.Report(&s, Report({"a"})).ok());
  CHECK(ReportedKeys(h.hub, "w1") == std::vector<std::string>{"demo/a"});
  CHECK(h.hub.Node("w1")->ignored_modules == 0);
  CHECK(h.LogLines(kIgnoredLog) == 0);
}

TEST_CASE("hub: after a restart a node may report a Module with a finalizer this run did not add") {
  Harness h;
  // As KubeSource says it at start: "old" is being deleted (in no plan) and carries kmodd's
  // finalizer from the previous run; "a" carries it too.
  SourceUpdate start = Set({"a"});
  start.finalized = {"demo/a", "demo/old"};
  h.hub.ApplySource(start);
  FakeStream w1, other;
  h.Connect(w1, "w1", true, Report({"a", "old"}, kmodd::v1::UNLOADING));
  CHECK(ReportedKeys(h.hub, "w1") == std::vector<std::string>{"demo/a", "demo/old"});
  // Any node may have run them under the previous run: this run cannot know.
  h.Connect(other, "other", false, Report({"a", "old"}, kmodd::v1::UNLOADING));
  CHECK(ReportedKeys(h.hub, "other") == std::vector<std::string>{"demo/a", "demo/old"});

  // A Module this run planned before it had the finalizer: only the nodes it was sent to.
  SourceUpdate fresh = Set({"fresh"});
  fresh.finalized = start.finalized;
  h.hub.ApplySource(fresh);
  SourceUpdate finalized;
  finalized.errors_hold_all = false;
  finalized.finalized = {"demo/a", "demo/fresh", "demo/old"};
  h.hub.ApplySource(finalized);
  REQUIRE(h.hub.Report(&w1, Report({"a", "fresh"})).ok());
  CHECK(ReportedKeys(h.hub, "w1") == std::vector<std::string>{"demo/a", "demo/fresh"});
  REQUIRE(h.hub.Report(&other, Report({"a", "fresh"})).ok());
  CHECK(ReportedKeys(h.hub, "other") == std::vector<std::string>{"demo/a"});
  CHECK(Rows(h.hub, "fresh") == std::vector<std::string>{"w1=Loaded:"});
}

TEST_CASE("hub: reports before the Modules are first read are checked once they are") {
  Harness h;
  FakeStream s;
  // The agent connects first and runs b, which the previous run accepted and this one
  // rejects (held), and claims a Module that does not exist.
  h.Connect(s, "w1", true, Report({"b", "ghost"}));
  CHECK(s.pushed.empty());
  SourceUpdate start = Set({"a"});
  start.errors.push_back(kmodd::api::Diagnostic{"", 0, "Module demo/b", "spec", "bad"});
  start.held = {"demo/b"};
  start.finalized = {"demo/b"};
  h.hub.ApplySource(start);
  CHECK(s.pushed.empty());  // it runs b: a push would unload it
  CHECK(ReportedKeys(h.hub, "w1") == std::vector<std::string>{"demo/b"});
  CHECK(h.hub.Node("w1")->ignored_modules == 1);

  // Another node that runs nothing of it is served at once.
  FakeStream w2;
  h.Connect(w2, "w2", true, Report({"ghost"}));
  REQUIRE(w2.pushed.size() == 1);
  CHECK(w2.pushed.back()->modules_size() == 1);
}

TEST_CASE("hub: a report over the caps is refused whole; long messages are cut") {
  kmodd::server::HubOptions options{"run", std::chrono::minutes(10)};
  options.limits.max_modules = 8;
  Harness h(options);
  h.hub.ApplySource(Set({"a"}));
  FakeStream s;
  h.Connect(s, "w1", true, Report({"a"}));
  std::vector<std::string> many;
  for (int i = 0; i < 9; ++i) {
    many.push_back(absl::StrCat("m", i));
  }
  kmodd::v1::NodeReport flood = Report(many);
  flood.mutable_ack()->set_version("run-1");
  flood.mutable_ack()->set_accepted(true);
  const absl::Status st = h.hub.Report(&s, flood);
  CHECK(st.code() == absl::StatusCode::kResourceExhausted);
  CHECK(std::string(st.message()).find("more than the 8 a node may report") != std::string::npos);
  // Nothing of it was taken: not the ACK, not the modules.
  CHECK(ReportedKeys(h.hub, "w1") == std::vector<std::string>{"demo/a"});
  CHECK(h.hub.Node("w1")->acked_version.empty());
  CHECK(h.LogLines("agent report refused") == 1);

  // A message of 1 MiB reaches the status as its first KiB and a marker.
  REQUIRE(h.hub.Report(&s, Report({"a"}, kmodd::v1::FAILED, std::string(1 << 20, 'x'))).ok());
  const std::vector<std::string> rows = Rows(h.hub, "a");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0] == absl::StrCat("w1=Failed:", std::string(1024, 'x'),
                                "... [truncated, 1048576 bytes in all]"));

  // A hello with more labels than a node may have is refused before anything is kept.
  kmodd::v1::NodeInfo labelled = Info("w2", true);
  for (int i = 0; i < 1024; ++i) {
    (*labelled.mutable_labels())[absl::StrCat("l", i)] = "v";
  }
  FakeStream w2;
  CHECK(h.hub.Hello(&w2, labelled).code() == absl::StatusCode::kResourceExhausted);
  CHECK_FALSE(h.hub.Node("w2"));
}

TEST_CASE("hub: ignored entries are logged once per stream, then at most every log_every") {
  Harness h;
  h.hub.ApplySource(Set({"a"}));
  FakeStream s;
  h.Connect(s, "w1", true, Report({"a", "ghost"}));
  for (int i = 0; i < 5; ++i) {
    REQUIRE(h.hub.Report(&s, Report({"a", "ghost", absl::StrCat("g", i)})).ok());
  }
  CHECK(h.LogLines(kIgnoredLog) == 1);
  CHECK(h.hub.Node("w1")->ignored_modules == 11);

  // A new stream a second later: not logged again so soon (a node reconnecting in a loop).
  h.clock.Advance(absl::Seconds(1));
  FakeStream again;
  h.Connect(again, "w1", true, Report({"ghost"}));
  CHECK(h.LogLines(kIgnoredLog) == 1);
  CHECK(h.hub.Node("w1")->ignored_modules == 1);  // counted per stream
  // A minute after the last line: the new stream is logged.
  h.clock.Advance(absl::Minutes(1));
  REQUIRE(h.hub.Report(&again, Report({"ghost"})).ok());
  CHECK(h.LogLines(kIgnoredLog) == 2);
  // Then, within that stream, only after log_every, with the count since.
  h.clock.Advance(absl::Minutes(1));
  REQUIRE(h.hub.Report(&again, Report({"ghost"})).ok());
  CHECK(h.LogLines(kIgnoredLog) == 2);
  h.clock.Advance(absl::Minutes(10));
  REQUIRE(h.hub.Report(&again, Report({"ghost"})).ok());
  CHECK(h.LogLines(kIgnoredLog) == 3);
  CHECK(h.LogLines(R"("ignored":2,"ignoredThisStream":4)") == 1);
}

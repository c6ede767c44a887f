#include "controller/server/status_writer.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>

#include "common/file.h"
#include "hub_fixtures.h"
#include "tests/fakes/fake_clock.h"
#include "tests/temp_dir.h"

using kmodd::server::Hub;
using kmodd::server::StatusWriter;
using kmodd::source::ModuleChanges;
using kmodd::source::SourceUpdate;

namespace {

// The status file's content once `pred` holds over it; "" if it never does. The real-time
// bound only ends a failing test.
std::string FileWhen(const std::string& path,
                     const std::function<bool(const std::string&)>& pred) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < give_up) {
    const std::string text = kmodd::ReadFile(path).value_or("");
    if (pred(text)) {
      return text;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return "";
}

bool ListsDemo(const std::string& text) {
  return text.find("namespace: demo") != std::string::npos;
}

}  // namespace

TEST_CASE("status writer writes at start, then a change only once its interval has passed") {
  kmodd::testing::TempDir dir{"status"};
  const std::string path = dir.path + "/status.yaml";
  std::FILE* devnull = std::fopen("/dev/null", "w");
  kmodd::Logger log(devnull);
  kmodd::FakeClock clock;
  Hub hub({"run", std::chrono::minutes(10)}, clock, log);
  StatusWriter writer(hub, path, clock, log, std::chrono::milliseconds(100));
  writer.Start();
  const std::string first = FileWhen(path, [](const std::string& t) { return !t.empty(); });
  REQUIRE_FALSE(first.empty());
  CHECK_FALSE(ListsDemo(first));
  REQUIRE(clock.AwaitWaiters(1));  // written, and letting changes gather

  SourceUpdate u;
  u.changes.push_back(ModuleChanges{{kmodd::testing::MakeModule("a", "r/a:1")}, {}});
  hub.ApplySource(u);
  clock.Advance(std::chrono::milliseconds(99));
  CHECK_FALSE(ListsDemo(kmodd::ReadFile(path).value_or("")));
  clock.Advance(std::chrono::milliseconds(1));
  CHECK(ListsDemo(FileWhen(path, ListsDemo)));
  writer.Stop();
  std::fclose(devnull);
}

TEST_CASE("status writer stops at once and writes a last time, without time passing") {
  kmodd::testing::TempDir dir{"status"};
  const std::string path = dir.path + "/status.yaml";
  std::FILE* devnull = std::fopen("/dev/null", "w");
  kmodd::Logger log(devnull);
  kmodd::FakeClock clock;
  Hub hub({"run", std::chrono::minutes(10)}, clock, log);
  StatusWriter writer(hub, path, clock, log, std::chrono::minutes(1));
  writer.Start();
  REQUIRE_FALSE(FileWhen(path, [](const std::string& t) { return !t.empty(); }).empty());
  REQUIRE(clock.AwaitWaiters(1));

  SourceUpdate u;
  u.changes.push_back(ModuleChanges{{kmodd::testing::MakeModule("a", "r/a:1")}, {}});
  hub.ApplySource(u);
  writer.Stop();
  CHECK(ListsDemo(kmodd::ReadFile(path).value_or("")));
  CHECK(clock.waiters() == 0);
  std::fclose(devnull);
}

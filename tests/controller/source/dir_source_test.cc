#include "controller/source/dir_source.h"

#include <catch2/catch.hpp>
#include <stdlib.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>

#include "absl/strings/str_cat.h"
#include "tests/fakes/fake_clock.h"
#include "tests/log_file.h"
#include "tests/temp_dir.h"

using kmodd::testing::TempDir;

namespace fs = std::filesystem;
using kmodd::source::DirSource;
using kmodd::source::SourceUpdate;

namespace {

void Write(const std::string& path, const std::string& text) {
  // As editors and `kubectl`-style tools do: a temporary file renamed into place.
  const std::string tmp = absl::StrCat(fs::path(path).parent_path().string(), "/.tmp");
  std::ofstream(tmp) << text;
  fs::rename(tmp, path);
}

std::string ModuleYaml(const std::string& name, const std::string& image) {
  return absl::StrCat(
      "apiVersion: kmm.sigs.x-k8s.io/v1beta1\nkind: Module\nmetadata: {name: ", name,
      ", namespace: demo}\nspec:\n  selector: {role: worker}\n  moduleLoader:\n    container:\n"
      "      modprobe: {moduleName: m}\n      kernelMappings:\n"
      "        - {regexp: '^.+$', containerImage: '",
      image, "'}\n");
}

// The Modules the callbacks describe, applied as a consumer would.
class Collector {
 public:
  void operator()(const SourceUpdate& u) {
    std::lock_guard lock(mu_);
    for (const auto& c : u.changes) {
      for (const auto& k : c.removed) {
        images_.erase(k);
      }
      for (const auto& m : c.set) {
        images_[m.Key()] = m.spec.module_loader->container.kernel_mappings[0].container_image;
      }
    }
    errors_ = u.errors;
    ++updates_;
    cv_.notify_all();
  }

  // Waits (bounded, in real time) until `pred` holds over (images, errors).
  template <typename Pred>
  bool WaitFor(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(images_, errors_); });
  }

  int Updates() {
    std::lock_guard lock(mu_);
    return updates_;
  }

  std::map<std::string, std::string> Images() {
    std::lock_guard lock(mu_);
    return images_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> images_;
  std::vector<kmodd::api::Diagnostic> errors_;
  int updates_ = 0;
};

using Images = std::map<std::string, std::string>;
using Errors = std::vector<kmodd::api::Diagnostic>;

constexpr std::chrono::milliseconds kDebounce(20);

// Lets the debounce pass in fake time whenever the source waits for it, until `pred` holds
// over what the callbacks said. The real-time bound only ends a failing test.
template <typename Pred>
bool SettleUntil(kmodd::FakeClock& clock, Collector& got, Pred pred) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!got.WaitFor(pred, std::chrono::milliseconds(1))) {
    if (std::chrono::steady_clock::now() > give_up) {
      return false;
    }
    if (clock.AwaitWaiters(1, std::chrono::milliseconds(10))) {
      clock.Advance(kDebounce);
    }
  }
  return true;
}

}  // namespace

TEST_CASE("dir source reads the directory, then follows adds, edits, bad files and deletes") {
  TempDir dir{"dirsource"};
  Write(dir.path + "/a.yaml", ModuleYaml("a", "r/a:1"));
  std::ofstream(dir.path + "/notes.txt") << "not a manifest";
  std::FILE* devnull = std::fopen("/dev/null", "w");
  kmodd::Logger log(devnull);
  Collector got;
  kmodd::FakeClock clock;
  DirSource src(dir.path, clock, log, kDebounce);
  REQUIRE(src.Start([&got](const SourceUpdate& u) { got(u); }).ok());
  // The first read happens before Start returns.
  CHECK(got.Images() == Images{{"demo/a", "r/a:1"}});

  Write(dir.path + "/b.yml", ModuleYaml("b", "r/b:1"));
  CHECK(SettleUntil(clock, got,
                    [](const Images& i, const Errors&) { return i.count("demo/b") == 1; }));

  Write(dir.path + "/a.yaml", ModuleYaml("a", "r/a:2"));
  CHECK(SettleUntil(clock, got,
                    [](const Images& i, const Errors&) { return i.at("demo/a") == "r/a:2"; }));

  // Written in place (IN_CLOSE_WRITE), and broken: a:2 stays, the file is reported.
  std::ofstream(dir.path + "/a.yaml") << "apiVersion: kmm.sigs.x-k8s.io/v1beta1\nkind: Module\n"
                                         "metadata: {name: a, namespace: demo}\nspec: [\n";
  CHECK(SettleUntil(clock, got, [](const Images&, const Errors& e) { return e.size() == 1; }));
  CHECK(got.Images().at("demo/a") == "r/a:2");

  fs::remove(dir.path + "/b.yml");
  CHECK(SettleUntil(clock, got,
                    [](const Images& i, const Errors&) { return i.count("demo/b") == 0; }));

  fs::remove(dir.path + "/a.yaml");
  CHECK(SettleUntil(clock, got,
                    [](const Images& i, const Errors& e) { return i.empty() && e.empty(); }));
  src.Stop();
  std::fclose(devnull);
}

TEST_CASE("dir source leaves a file being written in place alone until its writer closes it") {
  TempDir dir{"dirsource"};
  Write(dir.path + "/a.yaml", ModuleYaml("a", "r/a:1"));
  std::FILE* devnull = std::fopen("/dev/null", "w");
  kmodd::Logger log(devnull);
  Collector got;
  kmodd::FakeClock clock;
  DirSource src(dir.path, clock, log, kDebounce);
  REQUIRE(src.Start([&got](const SourceUpdate& u) { got(u); }).ok());

  // Truncated and still open, while another file's change makes the source read everything.
  std::ofstream in_place(dir.path + "/a.yaml");
  Write(dir.path + "/b.yaml", ModuleYaml("b", "r/b:1"));
  REQUIRE(SettleUntil(clock, got,
                      [](const Images& i, const Errors&) { return i.count("demo/b") == 1; }));
  CHECK(got.Images().at("demo/a") == "r/a:1");

  in_place << ModuleYaml("a", "r/a:2");
  in_place.close();
  CHECK(SettleUntil(clock, got,
                    [](const Images& i, const Errors&) { return i.at("demo/a") == "r/a:2"; }));

  // Emptied on purpose (opened, truncated, closed): its Modules go.
  std::ofstream(dir.path + "/a.yaml").close();
  CHECK(SettleUntil(clock, got,
                    [](const Images& i, const Errors&) { return i.count("demo/a") == 0; }));
  src.Stop();
  std::fclose(devnull);
}

TEST_CASE("dir source refuses a directory that does not exist") {
  kmodd::Logger log(stderr);
  kmodd::FakeClock clock;
  DirSource src("/nonexistent/kmodd-modules", clock, log);
  CHECK(src.Start([](const SourceUpdate&) {}).code() == absl::StatusCode::kNotFound);
}

TEST_CASE("dir source reads a change only once its debounce has passed without events") {
  TempDir dir{"dirsource"};
  std::FILE* devnull = std::fopen("/dev/null", "w");
  kmodd::Logger log(devnull);
  Collector got;
  kmodd::FakeClock clock;
  DirSource src(dir.path, clock, log, kDebounce);
  REQUIRE(src.Start([&got](const SourceUpdate& u) { got(u); }).ok());
  REQUIRE(got.Updates() == 1);  // the first read, empty

  Write(dir.path + "/a.yaml", ModuleYaml("a", "r/a:1"));
  REQUIRE(clock.AwaitWaiters(1));  // seen, and waiting for the quiet spell
  clock.Advance(kDebounce - std::chrono::milliseconds(1));
  CHECK(got.Updates() == 1);
  CHECK(got.Images().empty());
  CHECK(SettleUntil(clock, got,
                    [](const Images& i, const Errors&) { return i.count("demo/a") == 1; }));
  src.Stop();
  std::fclose(devnull);
}

TEST_CASE("dir source stops while waiting for a quiet spell") {
  TempDir dir{"dirsource"};
  std::FILE* devnull = std::fopen("/dev/null", "w");
  kmodd::Logger log(devnull);
  Collector got;
  kmodd::FakeClock clock;
  DirSource src(dir.path, clock, log, kDebounce);
  REQUIRE(src.Start([&got](const SourceUpdate& u) { got(u); }).ok());
  Write(dir.path + "/a.yaml", ModuleYaml("a", "r/a:1"));
  REQUIRE(clock.AwaitWaiters(1));
  src.Stop();  // returns without time passing, and reads nothing more
  CHECK(got.Updates() == 1);
  CHECK(clock.waiters() == 0);
  std::fclose(devnull);
}

namespace {

size_t Count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("dir source warns once per Module of a device plugin it does not run") {
  TempDir dir{"dirsource"};
  const std::string plugin = "  devicePlugin: {container: {image: 'r/plugin:1'}}\n";
  Write(dir.path + "/a.yaml", ModuleYaml("a", "r/a:1") + plugin);
  kmodd::testing::LogFile log_file;
  kmodd::Logger& log = log_file.log;
  Collector got;
  kmodd::FakeClock clock;
  DirSource src(dir.path, clock, log, kDebounce);
  REQUIRE(src.Start([&got](const SourceUpdate& u) { got(u); }).ok());
  const std::string warning = R"("msg":"Module field not acted on in standalone mode","module":"demo/a","field":"spec.devicePlugin")";
  CHECK(Count(log_file.Text(), warning) == 1);
  CHECK(log_file.Text().find("only `kmodd-controller run --kubernetes` makes; the module itself is loaded") !=
        std::string::npos);

  // Another image, the same plugin: no second warning.
  Write(dir.path + "/a.yaml", ModuleYaml("a", "r/a:2") + plugin);
  CHECK(SettleUntil(clock, got,
                    [](const Images& i, const Errors&) { return i.at("demo/a") == "r/a:2"; }));
  CHECK(Count(log_file.Text(), warning) == 1);

  // Without the plugin, then with it again: warned again.
  Write(dir.path + "/a.yaml", ModuleYaml("a", "r/a:3"));
  CHECK(SettleUntil(clock, got,
                    [](const Images& i, const Errors&) { return i.at("demo/a") == "r/a:3"; }));
  Write(dir.path + "/a.yaml", ModuleYaml("a", "r/a:4") + plugin);
  CHECK(SettleUntil(clock, got,
                    [](const Images& i, const Errors&) { return i.at("demo/a") == "r/a:4"; }));
  CHECK(Count(log_file.Text(), warning) == 2);
  src.Stop();
}

// The reconciler's own checks of what a spec makes it touch on the host: dirName and
// firmwarePath are checked again where they are joined onto the image's root (whoever sent
// the spec), and staged firmware that shadows the host's own is reported.

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "node-agent/server/reconciler.h"
#include "server_rig.h"
#include "tests/eventually.h"

using kmodd::agent::DesiredState;
using kmodd::agent::ErrorClass;
using kmodd::api::Phase;
using kmodd::testing::Eventually;
using kmodd::testing::FindStatus;
using kmodd::testing::PhaseIs;
using kmodd::testing::Spec;

namespace {

struct Rig {
  kmodd::testing::TempDir dir{"server"};
  kmodd::testing::LockedKernel kernel;
  kmodd::testing::FakeFirmware firmware;
  kmodd::RealClock clock;
  kmodd::agent::AgentState state{clock};
  kmodd::agent::Metrics metrics;
  std::string log_path = dir.path + "/agent.log";
  std::FILE* log_file = std::fopen(log_path.c_str(), "w");
  kmodd::Logger log{log_file};
  std::unique_ptr<kmodd::agent::Reconciler> rec;
  std::string image;

  Rig() {
    // The image's own tree, and beside it one that is not in the image.
    image = "dir:" + kmodd::testing::MakeDriverImage(dir.path + "/img", {"mod_a"});
    std::filesystem::create_directories(dir.path + "/img/firmware");
    kmodd::testing::MakeDriverImage(dir.path + "/evil", {"mod_evil"});
  }
  void Start() {
    kmodd::agent::ReconcilerOptions o;
    o.journal_path = dir.path + "/journal.json";
    o.retry = {std::chrono::milliseconds(20), std::chrono::milliseconds(100)};
    o.image_store = [](const std::string&) {
      return std::make_unique<kmodd::reconcile::DirImageStore>();
    };
    rec = std::make_unique<kmodd::agent::Reconciler>(kernel, &firmware, state, metrics, log, clock,
                                                      o);
    REQUIRE(rec->Start().ok());
  }
  ~Rig() {
    rec.reset();
    std::fclose(log_file);
  }
  void Desire(std::vector<kmodd::api::NodeModuleSpec> modules, const std::string& version) {
    // As the Sync client hands it over, without the wire's validation in front.
    rec->SetDesired(DesiredState{version, "controller", std::move(modules), {}});
  }
  std::string Log() {
    std::fflush(log_file);
    std::ifstream in(log_path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
};

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("a dirName or firmwarePath leaving the image is refused where it is used, whoever sent it",
          "[server]") {
  struct Row {
    const char* what;
    std::function<void(kmodd::api::NodeModuleSpec&)> breaks;
    const char* message;
  };
  const std::vector<Row> rows = {
      {"dirName up and out to a tree beside the image",
       [](auto& s) {
         s.config.modprobe.module_name = "mod_evil";
         s.config.modprobe.dir_name = "/../evil";
       },
       "modprobe.dirName: \"/../evil\" has a '..' component"},
      {"dirName relative",
       [](auto& s) {
         s.config.modprobe.module_name = "mod_evil";
         s.config.modprobe.dir_name = "../evil";
       },
       "modprobe.dirName: \"../evil\" is not an absolute path"},
      {"a -d in modprobe.args up and out",
       [](auto& s) {
         s.config.modprobe.module_name = "mod_evil";
         s.config.modprobe.args = kmodd::api::ModprobeArgs{{"-d", "/../evil"}, {}};
       },
       "modprobe -d (in args or rawArgs): \"/../evil\" has a '..' component"},
      {"firmwarePath up and out to the host's /etc",
       [](auto& s) { s.config.modprobe.firmware_path = "/../../../../../../etc"; },
       "modprobe.firmwarePath: \"/../../../../../../etc\" has a '..' component"},
      {"firmwarePath the whole image", [](auto& s) { s.config.modprobe.firmware_path = "/"; },
       "modprobe.firmwarePath: \"/\" names the whole image"},
  };
  for (const auto& row : rows) {
    SECTION(row.what) {
      Rig r;
      r.Start();
      kmodd::api::NodeModuleSpec spec = Spec("ns", "a", r.image, "mod_a");
      row.breaks(spec);
      r.Desire({spec}, "v1");
      REQUIRE(Eventually([&] { return PhaseIs(r.state, "ns/a", Phase::kFailed); }));
      const auto snap = r.state.Snapshot();
      const auto* st = FindStatus(snap, "ns/a");
      CHECK_THAT(st->message, Catch::StartsWith(row.message));
      CHECK(st->error_class == ErrorClass::kTerminal);
      // Nothing was loaded from outside the image, nothing staged from outside it.
      CHECK(r.kernel.With([](auto& k) { return k.loaded.empty(); }));
      CHECK(r.firmware.staged.empty());
    }
  }
}

TEST_CASE("staged firmware that shadows a host file is a warning in the status, logged once",
          "[server]") {
  Rig r;
  r.firmware.host_files["firmware/fw.bin"] = "/lib/firmware/firmware/fw.bin";
  r.Start();
  kmodd::api::NodeModuleSpec spec = Spec("ns", "a", r.image, "mod_a");
  spec.config.modprobe.firmware_path = "/firmware";
  r.Desire({spec}, "v1");
  const std::string warning =
      "staged firmware /var/lib/firmware/firmware/fw.bin shadows the host's "
      "/lib/firmware/firmware/fw.bin: the kernel loads the staged file instead";
  REQUIRE(Eventually([&] {
    const auto snap = r.state.Snapshot();
    const auto* st = FindStatus(snap, "ns/a");
    return st != nullptr && st->phase == Phase::kLoaded &&
           st->warnings == std::vector<std::string>{warning};
  }));
  // Not refused: the module runs with its firmware staged.
  CHECK(r.firmware.staged.count("ns/a") == 1);
  // More passes find the same: still one log line.
  for (int i = 0; i < 3; ++i) {
    const uint64_t passes = r.rec->passes();
    r.rec->Kick();
    REQUIRE(Eventually([&] { return r.rec->passes() > passes; }));
  }
  const std::string log = r.Log();
  CHECK(Count(log, "staged firmware shadows a host firmware file") == 1);
  CHECK_THAT(log, Catch::Contains("\"module\":\"ns/a\""));

  // Unloaded: the warning goes with the firmware.
  r.Desire({}, "v2");
  REQUIRE(Eventually([&] {
    const auto snap = r.state.Snapshot();
    return FindStatus(snap, "ns/a") == nullptr;
  }));
}

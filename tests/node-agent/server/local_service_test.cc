// The local Agent service over a real unix socket in a temp dir.

#include <catch2/catch.hpp>

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "kmodd/v1/agent.grpc.pb.h"
#include "node-agent/server/local_service.h"
#include "proto/convert.h"
#include "server_rig.h"
#include "tests/fakes/fake_clock.h"
#include "tests/eventually.h"

using kmodd::testing::Eventually;
using kmodd::testing::Spec;
namespace v1 = kmodd::v1;
using namespace std::chrono_literals;  // NOLINT(google-build-using-namespace)

namespace {

struct LocalRig {
  kmodd::testing::TempDir dir{"server"};
  kmodd::RealClock clock;
  kmodd::testing::LockedKernel kernel;
  kmodd::testing::FakeFirmware firmware;
  kmodd::agent::AgentState state{clock};
  kmodd::agent::Metrics metrics;
  std::FILE* devnull = std::fopen("/dev/null", "w");
  kmodd::Logger log{devnull};
  std::unique_ptr<kmodd::agent::Reconciler> rec;
  std::unique_ptr<kmodd::agent::LocalService> service;
  std::unique_ptr<kmodd::agent::LocalServer> server;
  std::unique_ptr<v1::Agent::Stub> stub;
  std::string socket;
  std::string image;

  LocalRig() {
    image = "dir:" + kmodd::testing::MakeDriverImage(dir.path + "/img", {"mod_a"});
    kmodd::agent::ReconcilerOptions o;
    o.journal_path = dir.path + "/journal.json";
    o.image_store = [](const std::string&) {
      return std::make_unique<kmodd::reconcile::DirImageStore>();
    };
    rec = std::make_unique<kmodd::agent::Reconciler>(kernel, &firmware, state, metrics, log,
                                                      clock, o);
    REQUIRE(rec->Start().ok());
    kmodd::agent::LocalServiceDeps deps;
    deps.state = &state;
    deps.reconciler = rec.get();
    deps.facts.name = "node-a";
    deps.firmware = [] {
      kmodd::firmware::StagedFile f;
      f.path = "kmm_ci_fw/fw.bin";
      f.owners = {"ns/a"};
      return std::vector<kmodd::firmware::StagedFile>{f};
    };
    deps.firmware_dir = "/var/lib/firmware";
    service = std::make_unique<kmodd::agent::LocalService>(std::move(deps), clock);
    socket = dir.path + "/run/kmodd/agent.sock";
    auto s = kmodd::agent::LocalServer::Start(socket, *service);
    REQUIRE(s.ok());
    server = std::move(*s);
    stub = v1::Agent::NewStub(
        grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
  }
  ~LocalRig() {
    server.reset();
    rec.reset();
    std::fclose(devnull);
  }
  v1::StatusResponse Status() {
    grpc::ClientContext ctx;
    v1::StatusResponse r;
    REQUIRE(stub->Status(&ctx, v1::StatusRequest(), &r).ok());
    return r;
  }
};

int Mode(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return static_cast<int>(st.st_mode & 07777);
}

}  // namespace

TEST_CASE("the local service listens on a root-only socket and removes it on stop", "[server][local]") {
  LocalRig r;
  CHECK(Mode(r.socket) == 0600);
  CHECK(Mode(r.dir.path + "/run/kmodd") == 0700);
  CHECK(r.Status().node().name() == "node-a");
  r.server->Stop();
  CHECK_FALSE(std::filesystem::exists(r.socket));
}

TEST_CASE("a load override over the socket loads the module and says what replaces it", "[server][local]") {
  LocalRig r;
  v1::OverrideRequest req;
  *req.mutable_module() = kmodd::proto::ToProto(Spec("ns", "a", r.image, "mod_a"));
  {
    grpc::ClientContext ctx;
    v1::OverrideResponse resp;
    REQUIRE(r.stub->Load(&ctx, req, &resp).ok());
    CHECK(resp.message().find("next desired state") != std::string::npos);
  }
  REQUIRE(Eventually([&] {
    const auto s = r.Status();
    return s.modules_size() == 1 && s.modules(0).phase() == v1::LOADED;
  }));
  const auto s = r.Status();
  CHECK(s.desired_source() == "override");
  REQUIRE(s.overrides_size() == 1);
  {
    grpc::ClientContext ctx;
    v1::PreviewPassResponse plan;
    REQUIRE(r.stub->PreviewPass(&ctx, v1::PreviewPassRequest(), &plan).ok());
    CHECK(plan.actions_size() == 0);
  }
  {
    // Events with replay: what already happened comes first.
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 2s);
    v1::EventsRequest er;
    er.set_replay(true);
    auto reader = r.stub->Events(&ctx, er);
    bool saw_loaded = false;
    v1::Event e;
    while (!saw_loaded && reader->Read(&e)) {
      saw_loaded = e.kind() == "PhaseChanged" && e.module() == "ns/a" && e.phase() == v1::LOADED;
    }
    CHECK(saw_loaded);
    ctx.TryCancel();
  }
  {
    grpc::ClientContext ctx;
    v1::OverrideRequest bad;
    v1::OverrideResponse resp;
    CHECK(r.stub->Unload(&ctx, bad, &resp).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  }
  v1::OverrideRequest unload;
  unload.mutable_module()->set_namespace_("ns");
  unload.mutable_module()->set_name("a");
  grpc::ClientContext ctx;
  v1::OverrideResponse resp;
  REQUIRE(r.stub->Unload(&ctx, unload, &resp).ok());
  REQUIRE(Eventually([&] { return r.Status().modules_size() == 0; }));
}

TEST_CASE("the local service lists the firmware ledger and has no images without a cache", "[server][local]") {
  LocalRig r;
  grpc::ClientContext ctx;
  v1::FirmwareResponse fw;
  REQUIRE(r.stub->Firmware(&ctx, v1::FirmwareRequest(), &fw).ok());
  CHECK(fw.directory() == "/var/lib/firmware");
  REQUIRE(fw.files_size() == 1);
  CHECK(fw.files(0).owners(0) == "ns/a");
  grpc::ClientContext ictx;
  v1::ImagesResponse images;
  CHECK(r.stub->Images(&ictx, v1::ImagesRequest(), &images).error_code() ==
        grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_CASE("a hostile load override is refused naming the field, and nothing changes", "[server][local]") {
  LocalRig r;
  struct Row {
    const char* what;
    std::function<void(kmodd::api::NodeModuleSpec&)> breaks;
    const char* field;
  };
  const std::vector<Row> rows = {
      {"dirName climbing out of the image",
       [](auto& s) {
         s.config.modprobe.dir_name = "../../etc";
         s.config.modprobe.firmware_path = "/etc";
       },
       "module ns/a: config.modprobe.dirName: \"../../etc\" is not an absolute path"},
      {"firmwarePath climbing out of the image",
       [](auto& s) { s.config.modprobe.firmware_path = "/firmware/../../../etc"; },
       "module ns/a: config.modprobe.firmwarePath: \"/firmware/../../../etc\" has a '..' "
       "component"},
      {"firmwarePath naming the whole image", [](auto& s) { s.config.modprobe.firmware_path = "/"; },
       "module ns/a: config.modprobe.firmwarePath: \"/\" names the whole image"},
  };
  for (const auto& row : rows) {
    SECTION(row.what) {
      kmodd::api::NodeModuleSpec spec = Spec("ns", "a", r.image, "mod_a");
      row.breaks(spec);
      v1::OverrideRequest req;
      *req.mutable_module() = kmodd::proto::ToProto(spec);
      grpc::ClientContext ctx;
      v1::OverrideResponse resp;
      const grpc::Status s = r.stub->Load(&ctx, req, &resp);
      CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
      CHECK_THAT(s.error_message(), Catch::StartsWith(row.field));
      // Nothing changed: no override, no module, nothing planned, nothing in the kernel.
      const auto status = r.Status();
      CHECK(status.overrides_size() == 0);
      CHECK(status.modules_size() == 0);
      CHECK(status.desired_source().empty());
      grpc::ClientContext pctx;
      v1::PreviewPassResponse plan;
      REQUIRE(r.stub->PreviewPass(&pctx, v1::PreviewPassRequest(), &plan).ok());
      CHECK(plan.actions_size() == 0);
      CHECK(plan.problems_size() == 0);
      CHECK(r.kernel.With([](auto& k) { return k.loaded.empty(); }));
    }
  }
}

TEST_CASE("the local service marks a staged firmware file that shadows the host's", "[server][local]") {
  LocalRig r;
  kmodd::agent::LocalServiceDeps deps;
  deps.state = &r.state;
  deps.reconciler = r.rec.get();
  deps.firmware = [] {
    std::vector<kmodd::firmware::StagedFile> files(2);
    files[0].path = "kmm_ci_fw/fw.bin";
    files[1].path = "other/x.bin";
    return files;
  };
  deps.shadowed = [](const std::vector<std::string>& paths) {
    std::vector<kmodd::firmware::Shadow> out;
    for (const auto& p : paths) {
      if (p == "kmm_ci_fw/fw.bin") {
        out.push_back({p, "/var/lib/firmware/" + p, "/lib/firmware/" + p});
      }
    }
    return out;
  };
  kmodd::agent::LocalService service(std::move(deps), r.clock);
  grpc::ServerContext ctx;
  v1::FirmwareResponse fw;
  REQUIRE(service.Firmware(&ctx, nullptr, &fw).ok());
  REQUIRE(fw.files_size() == 2);
  CHECK(fw.files(0).shadows() == "/lib/firmware/kmm_ci_fw/fw.bin");
  CHECK(fw.files(1).shadows().empty());
}

TEST_CASE("the events stream sends pull progress once per progress period, when it changed",
          "[server][local]") {
  kmodd::FakeClock clock;
  kmodd::agent::AgentState state(clock);
  auto sub = state.Subscribe(false);
  std::mutex mu;
  kmodd::agent::PullProgress progress;
  int looks = 0;  // one per round of the stream's loop
  std::vector<kmodd::agent::AgentEvent> written;
  std::atomic<bool> stop{false};
  std::thread stream([&] {
    kmodd::agent::StreamEvents(
        *sub, clock,
        [&] {
          std::lock_guard<std::mutex> l(mu);
          ++looks;
          return progress;
        },
        [&](const kmodd::agent::AgentEvent& e) {
          std::lock_guard<std::mutex> l(mu);
          written.push_back(e);
          return true;
        },
        [&] { return stop.load(); });
  });
  auto round = [&](int n) {  // waits for round n to be done and the stream waiting again
    REQUIRE(Eventually([&] {
      std::lock_guard<std::mutex> l(mu);
      return looks == n;
    }));
    REQUIRE(clock.AwaitWaiters(1));
    std::lock_guard<std::mutex> l(mu);
    return written;
  };
  REQUIRE(clock.AwaitWaiters(1));
  // An event goes out at once, without waiting for the period.
  state.AddEvent({0, "KernelChanged", "", "remove x", {}, 0, 0});
  auto out = round(1);
  REQUIRE(out.size() == 1);
  CHECK(out[0].kind == "KernelChanged");
  // A pull in flight: its progress at the end of the period.
  {
    std::lock_guard<std::mutex> l(mu);
    progress["r/a:1"] = {10, 100};
  }
  clock.Advance(std::chrono::milliseconds(250));
  out = round(2);
  REQUIRE(out.size() == 2);
  CHECK(out[1].kind == "PullProgress");
  CHECK(out[1].message == "r/a:1");
  CHECK(out[1].bytes_done == 10);
  CHECK(out[1].bytes_total == 100);
  CHECK(out[1].unix_ms == absl::ToUnixMillis(clock.Now()));
  // Unchanged at the next period: nothing.
  clock.Advance(std::chrono::milliseconds(250));
  CHECK(round(3).size() == 2);
  // Changed: sent.
  {
    std::lock_guard<std::mutex> l(mu);
    progress["r/a:1"] = {50, 100};
  }
  clock.Advance(std::chrono::milliseconds(250));
  out = round(4);
  REQUIRE(out.size() == 3);
  CHECK(out[2].bytes_done == 50);
  stop = true;
  clock.Advance(std::chrono::milliseconds(250));
  stream.join();
}

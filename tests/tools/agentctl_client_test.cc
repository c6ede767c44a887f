// agentctl's commands against a fake Agent service on a unix socket in a temp dir: the
// whole client path (dial, gRPC, formatting, exit codes) without an agent.

#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "kmodd/v1/agent.grpc.pb.h"
#include "tools/agentctl/command.h"
#include "tests/temp_dir.h"

namespace kmodd::agentctl {
namespace {

constexpr char kOverrideMessage[] =
    "override accepted; the next desired state from the controller replaces it";

// A small state model of the agent: modules by key, a few kept events, overrides.
class FakeAgent final : public v1::Agent::Service {
 public:
  FakeAgent() {
    auto* m = status_.add_modules();
    m->set_namespace_("storage");
    m->set_name("fast-nvme");
    m->set_phase(v1::LOADED);
    m->set_version("2.1");
    m->set_image_digest("sha256:00112233445566778899");
    status_.mutable_node()->set_name("worker-1");
    status_.mutable_node()->set_kernel_release("6.1.0-27-cloud-amd64");
    status_.set_controller("127.0.0.1:9443");
    status_.set_controller_connected(true);
    v1::Event e;
    e.set_unix_ms(1'700'000'000'000);
    e.set_kind("PullProgress");
    e.set_module("storage/fast-nvme");
    e.set_bytes_done(50 << 20);
    e.set_bytes_total(100 << 20);
    events_.push_back(e);
    e.Clear();
    e.set_kind("PhaseChanged");
    e.set_module("storage/fast-nvme");
    e.set_phase(v1::LOADED);
    events_.push_back(e);
  }

  grpc::Status Status(grpc::ServerContext*, const v1::StatusRequest*,
                      v1::StatusResponse* resp) override {
    std::lock_guard lock(mu_);
    *resp = status_;
    return grpc::Status::OK;
  }

  grpc::Status Events(grpc::ServerContext*, const v1::EventsRequest* req,
                      grpc::ServerWriter<v1::Event>* writer) override {
    std::vector<v1::Event> events;
    {
      std::lock_guard lock(mu_);
      events = events_;
    }
    if (req->replay()) {
      for (const auto& e : events) {
        writer->Write(e);
      }
    }
    // A live event, then the agent goes away: a follower returns when the stream ends.
    v1::Event live;
    live.set_kind("DesiredReceived");
    live.set_message("version r1-9");
    writer->Write(live);
    return grpc::Status::OK;
  }

  grpc::Status Load(grpc::ServerContext*, const v1::OverrideRequest* req,
                    v1::OverrideResponse* resp) override {
    std::lock_guard lock(mu_);
    auto* m = status_.add_modules();
    m->set_namespace_(req->module().namespace_());
    m->set_name(req->module().name());
    m->set_phase(v1::PENDING);
    m->set_image(req->module().container_image());
    status_.add_overrides(req->module().namespace_() + "/" + req->module().name());
    resp->set_message(kOverrideMessage);
    return grpc::Status::OK;
  }

  grpc::Status Unload(grpc::ServerContext*, const v1::OverrideRequest* req,
                      v1::OverrideResponse* resp) override {
    std::lock_guard lock(mu_);
    auto* mods = status_.mutable_modules();
    for (int i = 0; i < mods->size(); ++i) {
      if (mods->Get(i).namespace_() == req->module().namespace_() &&
          mods->Get(i).name() == req->module().name()) {
        mods->Mutable(i)->set_phase(v1::UNLOADING);
        resp->set_message(kOverrideMessage);
        return grpc::Status::OK;
      }
    }
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such module");
  }

  grpc::Status Images(grpc::ServerContext*, const v1::ImagesRequest* req,
                      v1::ImagesResponse* resp) override {
    auto* i = resp->add_images();
    i->set_tree("sha256-aaaa");
    i->set_in_use(true);
    i->set_bytes(1 << 20);
    if (req->prune()) {
      resp->add_pruned("sha256-bbbb");
    }
    return grpc::Status::OK;
  }

 private:
  std::mutex mu_;
  v1::StatusResponse status_;
  std::vector<v1::Event> events_;
};

struct Rig {
  kmodd::testing::TempDir tmp{"agentctl-test"};
  std::filesystem::path dir = tmp.path;
  std::string socket;
  FakeAgent agent;
  std::unique_ptr<grpc::Server> server;

  Rig() {
    socket = (dir / "agent.sock").string();
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
    b.RegisterService(&agent);
    server = b.BuildAndStart();
    REQUIRE(server != nullptr);
  }
  ~Rig() { server->Shutdown(); }

  // agentctl's exit code; its output in out/err.
  int Run(std::vector<std::string> args) {
    out.str("");
    err.str("");
    args.insert(args.begin(), {"--socket", socket});
    return agentctl::Run(args, kDefaultSocket, out, err);
  }
  std::ostringstream out;
  std::ostringstream err;
};

TEST_CASE("agentctl status and get round-trip through the Agent service") {
  Rig rig;
  REQUIRE(rig.Run({"status"}) == 0);
  CHECK(rig.out.str().find("Node: worker-1") != std::string::npos);
  CHECK(rig.out.str().find("storage/fast-nvme   Loaded   2.1       001122334455") !=
        std::string::npos);

  REQUIRE(rig.Run({"status", "-o", "json"}) == 0);
  CHECK(rig.out.str().find("\"phase\": \"LOADED\"") != std::string::npos);

  REQUIRE(rig.Run({"get", "storage/fast-nvme"}) == 0);
  CHECK(rig.out.str().find("name: fast-nvme") != std::string::npos);
  CHECK(rig.out.str().find("imageDigest: sha256:00112233445566778899") != std::string::npos);

  CHECK(rig.Run({"get", "storage/nope"}) == 1);
  CHECK(rig.err.str() == "error: module storage/nope not found on this node\n");
}

TEST_CASE("agentctl events prints the kept events and follows until the stream ends") {
  Rig rig;
  REQUIRE(rig.Run({"events"}) == 0);
  const std::string replay = rig.out.str();
  CHECK(replay.rfind("TIME", 0) == 0);
  CHECK(replay.find("pulled 50.0 MiB / 100.0 MiB (50%)") != std::string::npos);
  CHECK(replay.find("Loaded") != std::string::npos);

  REQUIRE(rig.Run({"events", "-f"}) == 0);
  CHECK(rig.out.str().find("pulled") == std::string::npos);
  CHECK(rig.out.str().find("version r1-9") != std::string::npos);
}

TEST_CASE("agentctl load and unload send overrides and print the agent's answer") {
  Rig rig;
  const auto file = rig.dir / "m.yaml";
  std::ofstream(file) << "name: a\nnamespace: ns\nconfig:\n  kernelVersion: '6.1'\n"
                         "  containerImage: reg/a:1\n  modprobe: {moduleName: a}\n";
  REQUIRE(rig.Run({"load", "-f", file.string()}) == 0);
  CHECK(rig.out.str() == std::string("ns/a: ") + kOverrideMessage + "\n");
  REQUIRE(rig.Run({"status"}) == 0);
  CHECK(rig.out.str().find("Overrides (until the next desired state): ns/a") !=
        std::string::npos);
  CHECK(rig.out.str().find("ns/a                Pending") != std::string::npos);

  REQUIRE(rig.Run({"unload", "ns/a"}) == 0);
  CHECK(rig.out.str() == std::string("ns/a: ") + kOverrideMessage + "\n");
  CHECK(rig.Run({"unload", "ns/zzz"}) == 1);
  CHECK(rig.err.str() == "error: unload: no such module\n");
}

TEST_CASE("agentctl images --prune lists what was removed") {
  Rig rig;
  REQUIRE(rig.Run({"images", "--prune"}) == 0);
  CHECK(rig.out.str().rfind("removed sha256-bbbb\n", 0) == 0);
  // Unimplemented methods surface as the agent's error, not as a crash.
  CHECK(rig.Run({"firmware"}) == 1);
  CHECK(rig.err.str().rfind("error: firmware: ", 0) == 0);
}

TEST_CASE("agentctl says how to fix a missing or forbidden socket") {
  Rig rig;
  const std::string missing = (rig.dir / "nope.sock").string();
  std::ostringstream out;
  std::ostringstream err;
  CHECK(Run({"status"}, missing, out, err) == 1);
  CHECK(err.str() == "error: cannot reach the agent at " + missing +
                         ": no such file or directory; is kmodd-agent running, and are you "
                         "root?\n");

  if (geteuid() != 0) {  // root opens any socket; the mode check is for everyone else
    REQUIRE(chmod(rig.socket.c_str(), 0) == 0);
    err.str("");
    CHECK(Run({"status"}, rig.socket, out, err) == 1);
    CHECK(err.str().find("permission denied; is kmodd-agent running, and are you root?") !=
          std::string::npos);
  }

  // A socket file nobody listens on (the agent died): gRPC's error, same advice.
  rig.server->Shutdown();
  rig.server->Wait();
  const std::string stale = (rig.dir / "stale.sock").string();
  {
    grpc::ServerBuilder b;
    FakeAgent other;
    b.AddListeningPort("unix:" + stale, grpc::InsecureServerCredentials());
    b.RegisterService(&other);
    auto s = b.BuildAndStart();
    s->Shutdown();
  }
  if (std::filesystem::exists(stale)) {
    err.str("");
    CHECK(Run({"plan"}, stale, out, err) == 1);
    CHECK(err.str().find("; is kmodd-agent running, and are you root?") != std::string::npos);
  }
}

TEST_CASE("agentctl refuses a command line that does not parse, before dialing, naming the flag") {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"load", "-f"}, "error: -f needs a path (a NodeModulesConfig module entry, or - for stdin)"},
      {{"load"}, "error: -f is required"},
      {{"events", "--follw"}, "error: unknown flag --follw (did you mean --follow?)"},
      {{"status", "extra"}, "error: unexpected argument \"extra\": agentctl status takes no"},
      {{"get"}, "error: agentctl get needs NAMESPACE/NAME"},
      {{"get", "a/b", "c/d"}, "error: unexpected argument \"c/d\""},
      {{"status", "--socket"}, "error: --socket needs a value (PATH)"},
      {{"status", "--socket="}, "error: --socket is empty"},
      {{"status", "-o", "yaml", "-o", "json"}, "error: -o is given more than once"},
      {{"plan", "-o", "wide"}, "error: plan does not print -o wide"},
      {{"frobnicate"}, "error: unknown command \"frobnicate\""},
  };
  for (const Case& c : cases) {
    INFO(c.says);
    std::ostringstream out;
    std::ostringstream err;
    CHECK(Run(c.args, "/nonexistent/agent.sock", out, err) == 2);
    CHECK_THAT(err.str(), Catch::StartsWith(c.says));
    CHECK(out.str().empty());
  }
}

TEST_CASE("agentctl --help anywhere prints the usage, of the command when one is named") {
  std::ostringstream out;
  std::ostringstream err;
  CHECK(Run({"--help"}, "/nonexistent/agent.sock", out, err) == 0);
  CHECK_THAT(out.str(), Catch::StartsWith("usage: agentctl [--socket PATH] COMMAND [ARGS]"));
  CHECK_THAT(out.str(), Catch::Contains("  --socket PATH"));
  out.str("");
  CHECK(Run({"load", "--help"}, "/nonexistent/agent.sock", out, err) == 0);
  CHECK_THAT(out.str(), Catch::StartsWith("usage: agentctl load -f FILE"));
  // The command's own flags, from the flags it parses.
  CHECK_THAT(out.str(), Catch::Contains("  -f, --filename FILE  a NodeModulesConfig module entry"));
  out.str("");
  CHECK(Run({"events", "--socket", "/x", "--help", "-f"}, "/nonexistent/agent.sock", out, err) == 0);
  CHECK_THAT(out.str(), Catch::Contains("  --replay      with -f: the recent events first"));
  CHECK(err.str().empty());
}

}  // namespace
}  // namespace kmodd::agentctl

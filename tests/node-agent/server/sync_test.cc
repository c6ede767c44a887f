// The Sync client against a real gRPC Controller service on 127.0.0.1, with the real
// reconciler over FakeKernel and dir: images: ACK, NACK, fail-static, reconnect, mTLS.

#include <catch2/catch.hpp>

#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <utility>

#include "common/file.h"
#include "kmodd/v1/sync.grpc.pb.h"
#include "node-agent/server/reconciler.h"
#include "node-agent/server/sync_client.h"
#include "proto/convert.h"
#include "server_rig.h"
#include "tests/common/http/test_pki.h"
#include "tests/eventually.h"

using kmodd::api::Phase;
using kmodd::testing::Eventually;
using kmodd::testing::PhaseIs;
using kmodd::testing::Spec;
namespace v1 = kmodd::v1;
using namespace std::chrono_literals;  // NOLINT(google-build-using-namespace)

namespace {

class TestController final : public v1::Controller::Service {
 public:
  grpc::Status Sync(grpc::ServerContext* ctx,
                    grpc::ServerReaderWriter<v1::NodeDesired, v1::NodeReport>* stream) override {
    v1::NodeReport hello;
    if (!stream->Read(&hello)) {
      return grpc::Status::OK;
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      hellos.push_back(hello);
      for (const auto& cn : ctx->auth_context()->FindPropertyValues("x509_common_name")) {
        peer_cn = std::string(cn.data(), cn.size());
      }
      stream_ = stream;
      if (initial) {
        stream->Write(*initial);
      }
    }
    cv_.notify_all();
    v1::NodeReport r;
    while (stream->Read(&r)) {
      std::lock_guard<std::mutex> l(mu_);
      reports.push_back(r);
      cv_.notify_all();
    }
    std::lock_guard<std::mutex> l(mu_);
    stream_ = nullptr;
    return grpc::Status::OK;
  }

  bool Push(const v1::NodeDesired& d) {
    std::lock_guard<std::mutex> l(mu_);
    return stream_ != nullptr && stream_->Write(d);
  }

  // `pred` runs under the lock.
  bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, timeout, pred);
  }

  bool HasAck(const std::string& version, bool accepted) {
    for (const auto& r : reports) {
      if (r.has_ack() && r.ack().version() == version && r.ack().accepted() == accepted) {
        return true;
      }
    }
    return false;
  }

  bool Reported(const std::string& version, v1::Phase phase) {
    for (const auto& r : reports) {
      for (const auto& m : r.modules()) {
        if (r.applied_version() == version && m.phase() == phase) {
          return true;
        }
      }
    }
    return false;
  }

  std::vector<v1::NodeReport> hellos;
  std::vector<v1::NodeReport> reports;
  std::string peer_cn;
  std::optional<v1::NodeDesired> initial;
  std::mutex mu_;

 private:
  std::condition_variable cv_;
  grpc::ServerReaderWriter<v1::NodeDesired, v1::NodeReport>* stream_ = nullptr;
};

struct ControllerServer {
  TestController svc;
  std::unique_ptr<grpc::Server> server;
  int port = 0;

  void Start(const std::shared_ptr<grpc::ServerCredentials>& creds) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:" + std::to_string(port), creds, &port);
    b.RegisterService(&svc);
    server = b.BuildAndStart();
    REQUIRE(server != nullptr);
  }
  void Stop() {
    server->Shutdown(std::chrono::system_clock::now() + 100ms);
    server.reset();
  }
  ~ControllerServer() {
    if (server) {
      Stop();
    }
  }
};

v1::NodeDesired Desired(const std::string& version,
                        const std::vector<kmodd::api::NodeModuleSpec>& specs) {
  v1::NodeDesired d;
  d.set_version(version);
  for (const auto& s : specs) {
    *d.add_modules() = kmodd::proto::ToProto(s);
  }
  return d;
}

struct Agent {
  kmodd::testing::TempDir dir{"server"};
  kmodd::testing::LockedKernel kernel;
  kmodd::testing::FakeFirmware firmware;
  kmodd::RealClock clock;  // the Sync client waits on the AgentState in real time
  kmodd::agent::AgentState state{clock};
  kmodd::agent::Metrics metrics;
  std::FILE* devnull = std::fopen("/dev/null", "w");
  kmodd::Logger log{devnull};
  std::unique_ptr<kmodd::agent::Reconciler> rec;
  std::unique_ptr<kmodd::agent::SyncClient> client;
  std::string image;

  Agent() {
    image = "dir:" + kmodd::testing::MakeDriverImage(dir.path + "/img", {"mod_a"});
    kmodd::agent::ReconcilerOptions o;
    o.journal_path = dir.path + "/journal.json";
    o.image_store = [](const std::string&) {
      return std::make_unique<kmodd::reconcile::DirImageStore>();
    };
    rec = std::make_unique<kmodd::agent::Reconciler>(kernel, &firmware, state, metrics, log,
                                                      clock, o);
    REQUIRE(rec->Start().ok());
  }
  void Connect(kmodd::agent::SyncClientOptions o) {
    o.backoff = {20ms, 200ms};
    o.desired_path = dir.path + "/desired.pb";
    o.seed = 7;
    kmodd::agent::NodeFacts facts;
    facts.name = "node-a";
    facts.kernel_release = "6.1.0-test";
    client = std::make_unique<kmodd::agent::SyncClient>(
        o, facts, state, [this](kmodd::agent::DesiredState d) { rec->SetDesired(std::move(d)); },
        log);
    client->Start();
  }
  kmodd::agent::SyncClientOptions Insecure(int port) const {
    kmodd::agent::SyncClientOptions o;
    o.target = "127.0.0.1:" + std::to_string(port);
    o.insecure = true;
    return o;
  }
  bool Loaded(const std::string& m) {
    return kernel.With([&](kmodd::testing::FakeKernel& k) { return k.IsLoaded(m); });
  }
  ~Agent() {
    client.reset();
    rec.reset();
    std::fclose(devnull);
  }
};

}  // namespace

TEST_CASE("desired state from the controller is ACKed, persisted, and reported Loaded", "[server][sync]") {
  Agent agent;
  ControllerServer ctl;
  ctl.svc.initial = Desired("v1", {Spec("ns", "a", agent.image, "mod_a")});
  ctl.Start(grpc::InsecureServerCredentials());
  agent.Connect(agent.Insecure(ctl.port));
  REQUIRE(ctl.svc.WaitFor([&] { return !ctl.svc.hellos.empty(); }));
  {
    std::lock_guard<std::mutex> l(ctl.svc.mu_);
    CHECK(ctl.svc.hellos[0].node().name() == "node-a");
    CHECK(ctl.svc.hellos[0].node().kernel_release() == "6.1.0-test");
  }
  REQUIRE(ctl.svc.WaitFor([&] { return ctl.svc.HasAck("v1", true); }));
  REQUIRE(ctl.svc.WaitFor([&] { return ctl.svc.Reported("v1", v1::LOADED); }));
  CHECK(agent.Loaded("mod_a"));
  CHECK(agent.state.Snapshot().controller.connected);
  auto bytes = kmodd::ReadFile(agent.dir.path + "/desired.pb");
  REQUIRE(bytes.ok());
  v1::NodeDesired persisted;
  REQUIRE(persisted.ParseFromString(*bytes));
  CHECK(persisted.version() == "v1");
  const auto perms =
      std::filesystem::status(agent.dir.path + "/desired.pb").permissions() & std::filesystem::perms::all;
  CHECK(perms == (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
}

TEST_CASE("an invalid desired state is NACKed and the previous one stays in force", "[server][sync]") {
  Agent agent;
  ControllerServer ctl;
  ctl.svc.initial = Desired("v1", {Spec("ns", "a", agent.image, "mod_a")});
  ctl.Start(grpc::InsecureServerCredentials());
  agent.Connect(agent.Insecure(ctl.port));
  REQUIRE(ctl.svc.WaitFor([&] { return ctl.svc.Reported("v1", v1::LOADED); }));
  REQUIRE(ctl.svc.Push(Desired("v2", {Spec("ns", "a", agent.image, "")})));  // no moduleName
  REQUIRE(ctl.svc.WaitFor([&] { return ctl.svc.HasAck("v2", false); }));
  {
    std::lock_guard<std::mutex> l(ctl.svc.mu_);
    CHECK_FALSE(ctl.svc.reports.back().ack().error().empty());
  }
  CHECK(agent.state.Snapshot().desired_version == "v1");
  CHECK(agent.Loaded("mod_a"));
}

TEST_CASE("when the controller goes away the module stays loaded, and the agent comes back", "[server][sync]") {
  Agent agent;
  ControllerServer ctl;
  ctl.svc.initial = Desired("v1", {Spec("ns", "a", agent.image, "mod_a")});
  ctl.Start(grpc::InsecureServerCredentials());
  agent.Connect(agent.Insecure(ctl.port));
  REQUIRE(ctl.svc.WaitFor([&] { return ctl.svc.Reported("v1", v1::LOADED); }));
  ctl.Stop();
  REQUIRE(Eventually([&] { return !agent.state.Snapshot().controller.connected; }));
  // Drift while the controller is away is still repaired from the last desired state.
  agent.kernel.With([](kmodd::testing::FakeKernel& k) { return k.loaded.erase("mod_a"); });
  agent.rec->Kick();
  REQUIRE(Eventually([&] { return agent.Loaded("mod_a"); }));
  // The status is published after the insert: wait for it, not only for the kernel.
  REQUIRE(Eventually([&] { return PhaseIs(agent.state, "ns/a", Phase::kLoaded); }));
  ctl.Start(grpc::InsecureServerCredentials());  // same port
  REQUIRE(ctl.svc.WaitFor([&] { return ctl.svc.hellos.size() == 2; }));
  REQUIRE(Eventually([&] { return agent.state.Snapshot().controller.connected; }));
  {
    std::lock_guard<std::mutex> l(ctl.svc.mu_);
    // The hello after a reconnect already carries the module as Loaded.
    REQUIRE(ctl.svc.hellos[1].modules_size() == 1);
    CHECK(ctl.svc.hellos[1].modules(0).phase() == v1::LOADED);
    CHECK(ctl.svc.hellos[1].applied_version() == "v1");
  }
}

namespace {

struct MtlsPki {
  std::string ca, server_cert, server_key, client_cert, client_key;
};

// A CA that signs a server certificate for 127.0.0.1 and a client certificate for `node`.
MtlsPki MakeMtlsPki(const std::string& node) {
  const kmodd::http::testing::TestCa ca;
  auto [server_cert, server_key] =
      ca.Issue("kmodd-controller", "IP:127.0.0.1,DNS:localhost", "serverAuth");
  auto [client_cert, client_key] = ca.Issue(node, "", "clientAuth");
  return {ca.Pem(), std::move(server_cert), std::move(server_key), std::move(client_cert),
          std::move(client_key)};
}

// The server's certificate from `p`; client certificates verified against `client_ca`.
std::shared_ptr<grpc::ServerCredentials> ServerTls(const MtlsPki& p, const std::string& client_ca) {
  grpc::SslServerCredentialsOptions o(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  o.pem_root_certs = client_ca;
  o.pem_key_cert_pairs.push_back({p.server_key, p.server_cert});
  return grpc::SslServerCredentials(o);
}

kmodd::agent::SyncClientOptions ClientTls(int port, const MtlsPki& trusted, const MtlsPki& mine) {
  kmodd::agent::SyncClientOptions o;
  o.target = "127.0.0.1:" + std::to_string(port);
  o.ca_pem = trusted.ca;
  o.cert_pem = mine.client_cert;
  o.key_pem = mine.client_key;
  return o;
}

}  // namespace

TEST_CASE("over mTLS the controller sees the node's certificate and the agent applies its state", "[server][sync]") {
  const MtlsPki pki = MakeMtlsPki("node-a");
  Agent agent;
  ControllerServer ctl;
  ctl.svc.initial = Desired("v1", {Spec("ns", "a", agent.image, "mod_a")});
  ctl.Start(ServerTls(pki, pki.ca));
  agent.Connect(ClientTls(ctl.port, pki, pki));
  REQUIRE(ctl.svc.WaitFor([&] { return ctl.svc.Reported("v1", v1::LOADED); }));
  std::lock_guard<std::mutex> l(ctl.svc.mu_);
  CHECK(ctl.svc.peer_cn == "node-a");
}

TEST_CASE("a controller whose certificate another CA signed is refused", "[server][sync]") {
  const MtlsPki mine = MakeMtlsPki("node-a");
  const MtlsPki other = MakeMtlsPki("node-a");
  Agent agent;
  ControllerServer ctl;
  ctl.svc.initial = Desired("v1", {Spec("ns", "a", agent.image, "mod_a")});
  // The controller would accept the agent; the agent must not accept the controller.
  ctl.Start(ServerTls(other, mine.ca));
  agent.Connect(ClientTls(ctl.port, mine, mine));
  CHECK_FALSE(ctl.svc.WaitFor([&] { return !ctl.svc.hellos.empty(); }, 1500ms));
  CHECK_FALSE(agent.state.Snapshot().controller.connected);
  CHECK(agent.state.Snapshot().desired_version.empty());
  CHECK_FALSE(agent.Loaded("mod_a"));
}

// The Sync server in process: a real gRPC server on 127.0.0.1:0, Modules from a real
// watched directory, and real gRPC client streams acting as agents, in plain text and
// with mutual TLS.

#include "controller/server/sync_server.h"

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file.h"
#include "controller/source/dir_source.h"
#include "kmodd/v1/sync.grpc.pb.h"
#include "tests/common/http/test_pki.h"
#include "tests/controller/server/fake_authenticator.h"
#include "tests/fakes/fake_clock.h"
#include "tests/eventually.h"
#include "tests/log_file.h"
#include "tests/temp_dir.h"

using kmodd::testing::Eventually;
using kmodd::testing::TempDir;

namespace fs = std::filesystem;
using kmodd::http::testing::TestCa;
using kmodd::server::Hub;
using kmodd::server::ServerOptions;
using kmodd::server::SyncServer;
using kmodd::v1::NodeDesired;
using kmodd::v1::NodeReport;

namespace {

std::string ModuleYaml(const std::string& image) {
  return absl::StrCat(
      "apiVersion: kmm.sigs.x-k8s.io/v1beta1\nkind: Module\nmetadata: {name: a, namespace: demo}\n"
      "spec:\n  selector: {role: worker}\n  moduleLoader:\n    container:\n"
      "      modprobe: {moduleName: m}\n      kernelMappings:\n"
      "        - {regexp: '^6\\.1\\.', containerImage: '",
      image, "'}\n");
}

// A controller: directory source, hub and server, logging into a file the test reads.
struct Controller {
  explicit Controller(ServerOptions opts)
      : hub({"r1", std::chrono::minutes(10)}, clock, log),
        source(dir.path, clock, log, std::chrono::milliseconds(20)),
        server(hub, std::move(opts), log) {
    WriteModule("r/a:1");
    REQUIRE(source.Start([this](const kmodd::source::SourceUpdate& u) { hub.ApplySource(u); }).ok());
    REQUIRE(server.Start().ok());
  }
  ~Controller() {
    source.Stop();
    server.Shutdown();
  }
  void WriteModule(const std::string& image) {
    REQUIRE(kmodd::WriteFileAtomic(dir.path + "/a.yaml", ModuleYaml(image)).ok());
  }
  std::string Logs() { return log_file.Text(); }
  std::string Target() const { return absl::StrCat("127.0.0.1:", server.port()); }

  TempDir dir{"sync"};
  kmodd::testing::LogFile log_file;
  kmodd::Logger& log = log_file.log;
  // Real time: real gRPC streams, and Eventually's bound is on this clock.
  kmodd::RealClock clock;
  Hub hub;
  kmodd::source::DirSource source;
  SyncServer server;
};

// A channel of its own (its own TCP connection): channels with equal arguments would
// share one through gRPC's global subchannel pool.
std::shared_ptr<grpc::Channel> DistinctChannel(const std::string& target,
                                               const std::shared_ptr<grpc::ChannelCredentials>& creds,
                                               int n) {
  grpc::ChannelArguments args;
  args.SetInt("kmodd.test.channel", n);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(target, creds, args);
}

// An agent: one Sync stream with a bounded deadline.
struct Agent {
  Agent(const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& creds,
        const std::string& name, bool worker, const std::string& token = "")
      : Agent(grpc::CreateChannel(target, creds), name, worker, token) {}
  Agent(const std::shared_ptr<grpc::Channel>& channel, const std::string& name, bool worker,
        const std::string& token = "")
      : stub(kmodd::v1::Controller::NewStub(channel)) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    if (!token.empty()) {
      ctx.AddMetadata("authorization", "Bearer " + token);
    }
    stream = stub->Sync(&ctx);
    NodeReport hello;
    hello.mutable_node()->set_name(name);
    hello.mutable_node()->set_kernel_release("6.1.0-27-cloud-amd64");
    if (worker) {
      (*hello.mutable_node()->mutable_labels())["role"] = "worker";
    }
    stream->Write(hello);
  }
  NodeDesired Next() {
    NodeDesired d;
    REQUIRE(stream->Read(&d));
    return d;
  }
  void Ack(const std::string& version) {
    NodeReport r;
    r.mutable_ack()->set_version(version);
    r.mutable_ack()->set_accepted(true);
    auto* m = r.add_modules();
    m->set_namespace_("demo");
    m->set_name("a");
    m->set_phase(kmodd::v1::LOADED);
    REQUIRE(stream->Write(r));
  }
  // The status the stream ended with (after the server ended it).
  grpc::Status End() {
    NodeDesired d;
    while (stream->Read(&d)) {
    }
    return stream->Finish();
  }

  std::unique_ptr<kmodd::v1::Controller::Stub> stub;
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<NodeReport, NodeDesired>> stream;
};

std::shared_ptr<grpc::ChannelCredentials> ClientTls(const std::string& ca,
                                                    const std::pair<std::string, std::string>& kc) {
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ca;
  o.pem_cert_chain = kc.first;
  o.pem_private_key = kc.second;
  return grpc::SslCredentials(o);
}

// A server in Kubernetes mode: TLS, tokens checked by `auth`.
ServerOptions TokenServer(TestCa& ca, kmodd::server::Authenticator& auth) {
  ServerOptions opts;
  opts.listen = "127.0.0.1:0";
  std::tie(opts.cert_pem, opts.key_pem) = ca.Issue("kmodd controller", "IP:127.0.0.1", "serverAuth");
  opts.ca_pem = ca.Pem();
  opts.authenticator = &auth;
  return opts;
}

std::shared_ptr<grpc::ChannelCredentials> ServerOnlyTls(const TestCa& ca) {
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ca.Pem();
  return grpc::SslCredentials(o);
}

}  // namespace

TEST_CASE("sync: agents get their plan on connect, and only matching ones get a change") {
  ServerOptions opts;
  opts.listen = "127.0.0.1:0";
  opts.insecure = true;
  Controller c(opts);
  auto creds = grpc::InsecureChannelCredentials();
  Agent w1(c.Target(), creds, "w1", true);
  Agent w2(c.Target(), creds, "w2", true);
  Agent other(c.Target(), creds, "other", false);

  NodeDesired d1 = w1.Next();
  REQUIRE(d1.modules_size() == 1);
  CHECK(d1.modules(0).container_image() == "r/a:1");
  CHECK(d1.modules(0).kernel_version() == "6.1.0-27-cloud-amd64");
  CHECK(d1.version().rfind("r1-", 0) == 0);
  CHECK(w2.Next().modules_size() == 1);
  const NodeDesired o1 = other.Next();
  CHECK(o1.modules_size() == 0);

  w1.Ack(d1.version());
  CHECK(Eventually([&] { return c.hub.Node("w1")->acked_version == d1.version(); }));

  c.WriteModule("r/a:2");
  NodeDesired d2 = w1.Next();
  REQUIRE(d2.modules_size() == 1);
  CHECK(d2.modules(0).container_image() == "r/a:2");
  CHECK(d2.version() != d1.version());
  CHECK(w2.Next().modules(0).container_image() == "r/a:2");
  // The node the Module does not select was sent nothing new.
  CHECK(c.hub.Node("other")->pushed_version == o1.version());

  w1.Ack(d2.version());
  CHECK(Eventually([&] { return c.hub.Node("w1")->acked_version == d2.version(); }));
  auto status = c.hub.Status();
  REQUIRE(status.modules.size() == 1);
  CHECK(status.modules[0].module_loader.desired_number == 2);
  CHECK(status.modules[0].module_loader.available_number == 1);

  w2.ctx.TryCancel();
  CHECK(Eventually([&] { return !c.hub.Node("w2")->connected; }));
}

TEST_CASE("sync over mTLS: a node may only report as the node its certificate names") {
  TestCa ca;
  TestCa other_ca;
  ServerOptions opts;
  opts.listen = "127.0.0.1:0";
  std::tie(opts.cert_pem, opts.key_pem) = ca.Issue("kmodd controller", "IP:127.0.0.1", "serverAuth");
  opts.ca_pem = ca.Pem();
  Controller c(opts);

  SECTION("its CN names it: served") {
    Agent w1(c.Target(), ClientTls(ca.Pem(), ca.Issue("w1", "", "clientAuth")), "w1", true);
    CHECK(w1.Next().modules_size() == 1);
  }
  SECTION("a DNS SAN names it: served") {
    Agent w3(c.Target(), ClientTls(ca.Pem(), ca.Issue("agent", "DNS:w3", "clientAuth")), "w3",
             true);
    CHECK(w3.Next().modules_size() == 1);
  }
  SECTION("it claims another node: PERMISSION_DENIED, logged, node unknown") {
    Agent liar(c.Target(), ClientTls(ca.Pem(), ca.Issue("w1", "DNS:w1", "clientAuth")), "w2",
               true);
    grpc::Status st = liar.End();
    CHECK(st.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(st.error_message().find("\"w2\" is not the node of this client certificate") !=
          std::string::npos);
    CHECK_FALSE(c.hub.Node("w2"));
    CHECK(c.Logs().find("agent stream refused") != std::string::npos);
  }
  SECTION("its certificate is from another CA: refused at the handshake") {
    Agent stranger(c.Target(),
                   ClientTls(ca.Pem(), other_ca.Issue("w1", "", "clientAuth")), "w1", true);
    grpc::Status st = stranger.End();
    CHECK(st.error_code() == grpc::StatusCode::UNAVAILABLE);
    CHECK_FALSE(c.hub.Node("w1"));
  }
  SECTION("it has no certificate: refused at the handshake") {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ca.Pem();
    Agent anonymous(c.Target(), grpc::SslCredentials(o), "w1", true);
    CHECK(anonymous.End().error_code() == grpc::StatusCode::UNAVAILABLE);
  }
}

TEST_CASE("sync with tokens: an agent without a certificate reports only as its token's node") {
  TestCa ca;
  kmodd::server::testing::FakeAuthenticator auth(std::map<std::string, std::string>{{"token-w1", "w1"}});
  ServerOptions opts;
  opts.listen = "127.0.0.1:0";
  std::tie(opts.cert_pem, opts.key_pem) = ca.Issue("kmodd controller", "IP:127.0.0.1", "serverAuth");
  opts.ca_pem = ca.Pem();
  opts.authenticator = &auth;
  Controller c(opts);
  grpc::SslCredentialsOptions server_only;
  server_only.pem_root_certs = ca.Pem();
  const auto creds = grpc::SslCredentials(server_only);

  SECTION("its token is bound to its node: served") {
    Agent w1(c.Target(), creds, "w1", true, "token-w1");
    CHECK(w1.Next().modules_size() == 1);
  }
  SECTION("it claims another node: PERMISSION_DENIED, logged, node unknown") {
    Agent liar(c.Target(), creds, "w2", true, "token-w1");
    grpc::Status st = liar.End();
    CHECK(st.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK_FALSE(c.hub.Node("w2"));
    CHECK(c.Logs().find("agent stream refused") != std::string::npos);
  }
  SECTION("no token, or one that is not valid: UNAUTHENTICATED") {
    Agent anonymous(c.Target(), creds, "w1", true);
    CHECK(anonymous.End().error_code() == grpc::StatusCode::UNAUTHENTICATED);
    Agent forger(c.Target(), creds, "w1", true, "forged");
    CHECK(forger.End().error_code() == grpc::StatusCode::UNAUTHENTICATED);
    CHECK_FALSE(c.hub.Node("w1"));
  }
  SECTION("a client certificate signed by the controller's CA is not a credential") {
    Agent w3(c.Target(), ClientTls(ca.Pem(), ca.Issue("w3", "", "clientAuth")), "w3", true);
    CHECK(w3.End().error_code() == grpc::StatusCode::UNAUTHENTICATED);
    CHECK_FALSE(c.hub.Node("w3"));
  }
}

TEST_CASE("sync with tokens: hellos beyond the review pool are refused UNAVAILABLE") {
  TestCa ca;
  kmodd::server::testing::FakeAuthenticator auth(
      std::map<std::string, std::string>{{"token-w1", "w1"}, {"token-w2", "w2"}});
  ServerOptions opts = TokenServer(ca, auth);
  opts.limits.review_workers = 1;
  opts.limits.review_queue = 0;
  Controller c(opts);
  const auto creds = ServerOnlyTls(ca);

  auth.Hold();  // the API server is slow: the one worker stays busy with w1's review
  Agent w1(c.Target(), creds, "w1", true, "token-w1");
  auth.AwaitWaiting(1);
  Agent w2(c.Target(), creds, "w2", true, "token-w2");
  const grpc::Status refused = w2.End();
  CHECK(refused.error_code() == grpc::StatusCode::UNAVAILABLE);
  CHECK(c.Logs().find("token reviews are backed up") != std::string::npos);
  auth.Release();
  CHECK(w1.Next().modules_size() == 1);
  // The agent's retry. The worker that answered w1 frees its slot just after w1 has its
  // answer, so a retry at once may still be refused, as a real agent's can: it backs off.
  int modules = -1;
  grpc::StatusCode ended = grpc::StatusCode::UNAVAILABLE;
  CHECK(Eventually([&] {
    Agent again(c.Target(), creds, "w2", true, "token-w2");
    NodeDesired d;
    if (again.stream->Read(&d)) {
      modules = d.modules_size();
      return true;
    }
    ended = again.stream->Finish().error_code();
    return ended != grpc::StatusCode::UNAVAILABLE;  // anything but "retry" ends the wait
  }));
  CHECK(modules == 1);
  CHECK(auth.calls() == 2);
}

TEST_CASE("sync with tokens: a stream ends when its token expires, not before") {
  TestCa ca;
  kmodd::FakeClock clock;
  kmodd::server::testing::FakeAuthenticator auth(
      std::map<std::string, std::string>{{"token-w1", "w1"}}, clock.Now() + absl::Minutes(10));
  ServerOptions opts = TokenServer(ca, auth);
  opts.clock = &clock;
  Controller c(opts);
  Agent w1(c.Target(), ServerOnlyTls(ca), "w1", true, "token-w1");
  CHECK(w1.Next().modules_size() == 1);
  clock.Advance(absl::Minutes(9));
  REQUIRE(clock.AwaitWaiters(1));
  CHECK(c.hub.Node("w1"));
  clock.Advance(absl::Minutes(2));
  const grpc::Status ended = w1.End();
  CHECK(ended.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(ended.error_message().find("expired") != std::string::npos);
}

TEST_CASE("sync: one address holds a bounded number of connections with streams") {
  ServerOptions opts;
  opts.listen = "127.0.0.1:0";
  opts.insecure = true;
  opts.limits.max_connections_per_peer = 2;
  Controller c(opts);
  const auto creds = grpc::InsecureChannelCredentials();
  // Two streams on one connection count once; a third connection is one too many.
  const auto shared = DistinctChannel(c.Target(), creds, 1);
  Agent a(shared, "w1", true);
  CHECK(a.Next().modules_size() == 1);
  Agent b(shared, "w2", true);
  CHECK(b.Next().modules_size() == 1);
  Agent d(DistinctChannel(c.Target(), creds, 2), "w3", true);
  CHECK(d.Next().modules_size() == 1);
  Agent e(DistinctChannel(c.Target(), creds, 3), "w4", true);
  const grpc::Status refused = e.End();
  CHECK(refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK_FALSE(c.hub.Node("w4"));
  CHECK(c.hub.Node("w3"));
}

TEST_CASE("identity: the claimed node must be the certificate's CN or one of its DNS names") {
  using kmodd::server::CheckIdentity;
  CHECK(CheckIdentity("w1", {"w1"}, {}).ok());
  CHECK(CheckIdentity("w1", {"agent"}, {"w0", "w1"}).ok());
  CHECK(CheckIdentity("w1", {}, {}).code() == absl::StatusCode::kPermissionDenied);
  CHECK(CheckIdentity("w1", {"w1.example"}, {"W1"}).code() == absl::StatusCode::kPermissionDenied);
}

namespace {

// The certificate the server showed on this client's connection.
std::string ServedCertificate(Agent& a) {
  const auto values = a.ctx.auth_context()->FindPropertyValues("x509_pem_cert");
  return values.empty() ? "" : std::string(values.front().data(), values.front().size());
}

}  // namespace

TEST_CASE("sync over mTLS: a renewed certificate is served to new connections, no restart") {
  TestCa ca;
  ServerOptions opts;
  opts.listen = "127.0.0.1:0";
  std::tie(opts.cert_pem, opts.key_pem) = ca.Issue("kmodd controller", "IP:127.0.0.1", "serverAuth");
  opts.ca_pem = ca.Pem();
  opts.reload_every = std::chrono::seconds(1);
  Controller c(opts);
  const auto client = ca.Issue("w1", "", "clientAuth");

  Agent before(c.Target(), ClientTls(ca.Pem(), client), "w1", true);
  CHECK(before.Next().modules_size() == 1);
  CHECK(ServedCertificate(before) == opts.cert_pem);

  const auto renewed = ca.Issue("kmodd controller", "IP:127.0.0.1", "serverAuth");
  REQUIRE(renewed.first != opts.cert_pem);
  REQUIRE(c.server.SetCertificate(renewed.first, renewed.second, ca.Pem()).ok());
  // The watcher looks every second: within a few, a new connection gets the new one.
  std::string served;
  for (int i = 0; i < 50 && served != renewed.first; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    Agent probe(c.Target(), ClientTls(ca.Pem(), client), "w1", true);
    probe.Next();
    served = ServedCertificate(probe);
  }
  CHECK(served == renewed.first);
}

TEST_CASE("sync over mTLS from files: a missing file refuses to start; SetCertificate is refused") {
  TestCa ca;
  TempDir dir{"sync"};
  const auto pair = ca.Issue("kmodd controller", "IP:127.0.0.1", "serverAuth");
  REQUIRE(kmodd::WriteFileAtomic(dir.path + "/tls.crt", pair.first).ok());
  REQUIRE(kmodd::WriteFileAtomic(dir.path + "/tls.key", pair.second, 0600).ok());
  FILE* devnull = std::fopen("/dev/null", "w");
  kmodd::Logger log(devnull);
  kmodd::FakeClock clock;
  Hub hub({"r1", std::chrono::minutes(10)}, clock, log);
  ServerOptions opts;
  opts.listen = "127.0.0.1:0";
  opts.cert_file = dir.path + "/tls.crt";
  opts.key_file = dir.path + "/tls.key";
  opts.ca_file = dir.path + "/ca.crt";  // not written
  SyncServer missing(hub, opts, log);
  const absl::Status st = missing.Start();
  CHECK(st.code() == absl::StatusCode::kNotFound);
  CHECK(std::string(st.message()).find("ca.crt") != std::string::npos);

  REQUIRE(kmodd::WriteFileAtomic(dir.path + "/ca.crt", ca.Pem()).ok());
  SyncServer from_files(hub, opts, log);
  REQUIRE(from_files.Start().ok());
  CHECK(from_files.SetCertificate(pair.first, pair.second, ca.Pem()).code() ==
        absl::StatusCode::kFailedPrecondition);
  from_files.Shutdown();
  std::fclose(devnull);
}

TEST_CASE("sync over mTLS: a node flooding 200,000 module entries is refused, others are served") {
  TestCa ca;
  ServerOptions opts;
  opts.listen = "127.0.0.1:0";
  std::tie(opts.cert_pem, opts.key_pem) = ca.Issue("kmodd controller", "IP:127.0.0.1", "serverAuth");
  opts.ca_pem = ca.Pem();
  Controller c(opts);

  // A compromised node with its own valid certificate. Its report, about 3.2 MB, fits in
  // one gRPC message: it claims the Module it does not run (Failed, "pwned") and 199,999
  // others, and says it again and again, on new streams as fast as they end.
  NodeReport flood;
  flood.mutable_node()->set_name("evil");
  flood.mutable_node()->set_kernel_release("6.1.0-27-cloud-amd64");
  auto* claim = flood.add_modules();
  claim->set_namespace_("demo");
  claim->set_name("a");
  claim->set_phase(kmodd::v1::FAILED);
  claim->set_message("pwned");
  for (int i = 1; i < 200'000; ++i) {
    auto* m = flood.add_modules();
    m->set_namespace_("x");
    m->set_name(absl::StrCat("m", i));
    m->set_phase(kmodd::v1::LOADED);
  }
  REQUIRE(flood.ByteSizeLong() < 4u * 1024 * 1024);  // gRPC's default receive limit
  std::atomic<bool> stop{false};
  std::atomic<int> streams_ended{0};
  std::mutex mu;
  std::vector<grpc::Status> ends;
  std::thread flooder([&] {
    auto stub = kmodd::v1::Controller::NewStub(grpc::CreateChannel(
        c.Target(), ClientTls(ca.Pem(), ca.Issue("evil", "", "clientAuth"))));
    while (!stop.load()) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      auto stream = stub->Sync(&ctx);
      if (stream->Write(flood)) {
        (void)stream->Write(flood);  // before the fix, the second one held the hub for minutes
      }
      NodeDesired d;
      while (stream->Read(&d)) {
      }
      grpc::Status st = stream->Finish();
      std::lock_guard lock(mu);
      ends.push_back(std::move(st));
      ++streams_ended;
    }
  });
  // Stopped and joined however the test ends (a failed REQUIRE throws).
  struct Joiner {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Joiner() {
      stop = true;
      if (t.joinable()) {
        t.join();
      }
    }
  } joiner{stop, flooder};
  auto wait_for_ends = [&](int n) {
    for (int i = 0; i < 600 && streams_ended.load() < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return streams_ended.load() >= n;
  };

  // The flood is under way before the agent connects...
  CHECK(wait_for_ends(1));
  Agent w1(c.Target(), ClientTls(ca.Pem(), ca.Issue("w1", "", "clientAuth")), "w1", true);
  const NodeDesired d = w1.Next();
  REQUIRE(d.modules_size() == 1);
  w1.Ack(d.version());
  CHECK(Eventually([&] {
    auto rec = c.hub.Node("w1");
    return rec && rec->acked_version == d.version() && rec->modules.size() == 1;
  }));
  // ...and still going once it has been served: it was served during the flood.
  const int ended_when_served = streams_ended.load();
  CHECK(wait_for_ends(ended_when_served + 1));
  stop = true;
  flooder.join();

  {
    std::lock_guard lock(mu);
    REQUIRE_FALSE(ends.empty());
    for (const grpc::Status& st : ends) {
      CHECK(st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
      CHECK(st.error_message() ==
            "the report lists 200000 modules, more than the 4096 a node may report; report "
            "refused and stream ended");
    }
  }
  CHECK(c.hub.Node("evil")->modules.empty());
  const auto status = c.hub.Status();
  REQUIRE(status.modules.size() == 1);
  REQUIRE(status.modules[0].nodes.size() == 1);
  CHECK(status.modules[0].nodes[0].node == "w1");
  CHECK(status.modules[0].nodes[0].phase == kmodd::api::Phase::kLoaded);
  CHECK(status.modules[0].module_loader.available_number == 1);
  // Refused on every stream, logged once.
  const std::string logs = c.Logs();
  size_t refusals = 0;
  for (size_t at = logs.find("agent report refused"); at != std::string::npos;
       at = logs.find("agent report refused", at + 1)) {
    ++refusals;
  }
  CHECK(refusals == 1);
}

// The real agent meets the real controller: the agent's SyncClient and Reconciler (over
// FakeKernel; driver images pulled from a real registry into the real image cache) against
// the controller's SyncServer, Hub and directory source on 127.0.0.1 over mutual TLS. The
// agent gets its desired state from a Module manifest, loads it, reports it; the
// controller restarts (a new process would have a new Hub, source and server, on the same
// address) and the agent reconnects by itself, keeps the module loaded meanwhile, and
// applies the restarted controller's changes. Without the registry it fails, never skips.
// node-agent/ never includes controller/ headers; a test may link both.

#include <catch2/catch.hpp>

#include <cstdio>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/file.h"
#include "controller/server/hub.h"
#include "controller/server/sync_server.h"
#include "controller/source/dir_source.h"
#include "node-agent/image/cache.h"
#include "node-agent/reconcile/oci_image_store.h"
#include "node-agent/server/reconciler.h"
#include "node-agent/server/sync_client.h"
#include "registry_rig.h"
#include "server_rig.h"
#include "tests/common/http/test_pki.h"
#include "tests/eventually.h"

using kmodd::api::Phase;
using kmodd::testing::Eventually;
using kmodd::testing::PhaseIs;
using namespace std::chrono_literals;  // NOLINT(google-build-using-namespace)

namespace {

std::string ModuleYaml(const std::string& image, const std::string& module) {
  return absl::StrCat(
      "apiVersion: kmm.sigs.x-k8s.io/v1beta1\nkind: Module\nmetadata: {name: a, namespace: demo}\n"
      "spec:\n  selector: {role: worker}\n  moduleLoader:\n    container:\n"
      "      modprobe: {moduleName: ", module, "}\n      kernelMappings:\n"
      "        - {regexp: '^6\\.1\\.', containerImage: '", image, "'}\n");
}

// The controller as kmodd-controller runs it standalone: directory source, hub, Sync server.
struct Controller {
  Controller(const std::string& manifests, kmodd::server::ServerOptions opts, kmodd::Logger& log)
      : hub({"run-" + std::to_string(++runs), 10min}, clock, log),
        source(manifests, clock, log, 20ms),
        server(hub, std::move(opts), log) {
    REQUIRE(source.Start([this](const kmodd::source::SourceUpdate& u) { hub.ApplySource(u); }).ok());
    REQUIRE(server.Start().ok());
  }
  ~Controller() {
    source.Stop();
    server.Shutdown();
  }
  // Waits, bounded, for the hub's record of `node` to satisfy `pred`.
  bool NodeEventually(const std::string& node,
                      const std::function<bool(const kmodd::server::NodeRecord&)>& pred) {
    if (Eventually(
            [&] {
              const auto n = hub.Node(node);
              return n.has_value() && pred(*n);
            },
            10s)) {
      return true;
    }
    const auto n = hub.Node(node);  // what it was instead, for the failure's message
    if (!n) {
      UNSCOPED_INFO("the controller knows no node " << node);
    } else {
      UNSCOPED_INFO("node " << node << ": connected=" << n->connected << " pushed="
                            << n->pushed_version << " acked=" << n->acked_version
                            << " applied=" << n->applied_version << " nack=" << n->nack_error
                            << " modules=" << n->modules.size());
      if (!n->modules.empty()) {
        UNSCOPED_INFO("first module: " << n->modules[0].key << " "
                                       << kmodd::api::PhaseName(n->modules[0].phase) << " "
                                       << n->modules[0].message);
      }
    }
    if (log_text) {
      UNSCOPED_INFO("controller log:\n" << log_text());
    }
    return false;
  }
  static inline int runs = 0;
  std::function<std::string()> log_text;  // for a failure's message
  // Real time: a real agent and a real Sync stream run against it.
  kmodd::RealClock clock;
  kmodd::server::Hub hub;
  kmodd::source::DirSource source;
  kmodd::server::SyncServer server;
};

// The node reports demo/a Loaded from the image with `digest`, working on what it was sent.
bool ReportsLoaded(const kmodd::server::NodeRecord& n, const std::string& digest) {
  return n.connected && n.modules.size() == 1 && n.modules[0].key == "demo/a" &&
         n.modules[0].phase == kmodd::api::Phase::kLoaded && n.modules[0].image_digest == digest &&
         n.acked_version == n.pushed_version && n.applied_version == n.pushed_version;
}

}  // namespace

TEST_CASE("the real Sync client and server: desired state, reports, and a controller restart",
          "[server][sync][registry]") {
  kmodd::testing::TempDir dir{"server"};
  kmodd::testing::Registry registry("https");
  const std::string manifests = dir.path + "/manifests";
  std::filesystem::create_directories(manifests);
  const auto v1 = kmodd::testing::MakeDriver(&registry, dir.path, "kmodd/driver:v1", "mod_a");
  const auto v2 = kmodd::testing::MakeDriver(&registry, dir.path, "kmodd/driver:v2", "mod_b");
  REQUIRE(kmodd::WriteFileAtomic(manifests + "/a.yaml", ModuleYaml(v1.image, "mod_a")).ok());

  kmodd::http::testing::TestCa ca;
  kmodd::server::ServerOptions so;
  so.listen = "127.0.0.1:0";
  std::tie(so.cert_pem, so.key_pem) = ca.Issue("kmodd controller", "IP:127.0.0.1", "serverAuth");
  so.ca_pem = ca.Pem();
  const auto agent_cert = ca.Issue("node-a", "", "clientAuth");

  const std::string controller_log_path = dir.path + "/controller.log";
  std::FILE* controller_log_file = std::fopen(controller_log_path.c_str(), "w");
  {
    kmodd::Logger controller_log{controller_log_file};
    auto controller_log_text = [&] {
      std::fflush(controller_log_file);
      return kmodd::ReadFile(controller_log_path).value_or("");
    };
    auto controller = std::make_unique<Controller>(manifests, so, controller_log);
    controller->log_text = controller_log_text;
    const int port = controller->server.port();
    so.listen = absl::StrCat("127.0.0.1:", port);  // a restart binds the same address

    // The agent, as kmodd-agent run wires it (RealClock: the Sync client waits in real
    // time); its parts outlive the reconciler and the client below.
    kmodd::testing::AgentParts<kmodd::RealClock> agent;
    kmodd::agent::AgentState& state = agent.state;
    kmodd::agent::ReconcilerOptions ro = agent.Options();
    kmodd::image::ImageCache cache(dir.path + "/cache", kmodd::agent::BeastFactory());
    const std::string registry_ca = registry.Env("KMODD_REGISTRY_CA");
    ro.image_store = [&](const std::string& secret) {
      kmodd::reconcile::OciImageStore::Options io;
      io.ca_file = registry_ca;
      io.pull_secret = secret;
      return std::make_unique<kmodd::reconcile::OciImageStore>(cache, io);
    };
    kmodd::agent::Reconciler rec(agent.kernel, &agent.firmware, state, agent.metrics, agent.log,
                                  agent.clock, ro);
    REQUIRE(rec.Start().ok());
    kmodd::agent::SyncClientOptions co;
    co.target = so.listen;
    co.ca_pem = ca.Pem();
    std::tie(co.cert_pem, co.key_pem) = agent_cert;
    co.backoff = {20ms, 200ms};
    co.desired_path = agent.dir.path + "/desired.pb";
    co.seed = 7;
    kmodd::agent::NodeFacts facts;
    facts.name = "node-a";
    facts.kernel_release = "6.1.0-test";
    facts.labels = {{"role", "worker"}};
    kmodd::agent::SyncClient client(
        co, facts, state, [&rec](kmodd::agent::DesiredState d) { rec.SetDesired(std::move(d)); },
        agent.log);
    client.Start();
    auto loaded = [&](const std::string& m) { return agent.Loaded(m); };

    // Connected over mTLS under its certificate's name; the Module's desired state arrives,
    // is ACKed and persisted, loaded, and reported Loaded to the controller.
    REQUIRE(controller->NodeEventually("node-a", [&](const auto& n) { return ReportsLoaded(n, v1.digest); }));
    CHECK(loaded("mod_a"));
    CHECK(state.Snapshot().controller.connected);
    CHECK(std::filesystem::exists(co.desired_path));
    const std::string first_version = controller->hub.Node("node-a")->pushed_version;

    // The controller goes away: the agent keeps the module loaded and says it is alone.
    controller.reset();
    REQUIRE(Eventually([&] { return !state.Snapshot().controller.connected; }, 10s));
    CHECK(loaded("mod_a"));
    CHECK(PhaseIs(state, "demo/a", Phase::kLoaded));

    // A new controller on the same address, from the manifests as they are now (the Module
    // moved to v2 meanwhile): the agent reconnects, gets the new state and applies it.
    REQUIRE(kmodd::WriteFileAtomic(manifests + "/a.yaml", ModuleYaml(v2.image, "mod_b")).ok());
    controller = std::make_unique<Controller>(manifests, so, controller_log);
    controller->log_text = controller_log_text;
    REQUIRE(controller->NodeEventually("node-a", [&](const auto& n) {
      return ReportsLoaded(n, v2.digest) && n.pushed_version != first_version;
    }));
    CHECK(loaded("mod_b"));
    CHECK_FALSE(loaded("mod_a"));
    CHECK(state.Snapshot().controller.connected);
    const auto snap = state.Snapshot();
    REQUIRE(snap.modules.size() == 1);
    CHECK(snap.modules[0].kernel_modules == std::vector<std::string>{"mod_b"});

    client.Stop();
    controller.reset();
  }
  std::fclose(controller_log_file);
}

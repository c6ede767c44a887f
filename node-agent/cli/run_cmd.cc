// kmodd-agent run: the agent as a daemon. Only wiring: flags into an immutable struct,
// real implementations built here and handed down (STYLE.md: thin main).

#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include "common/clock.h"
#include "common/file.h"
#include "common/flags.h"
#include "common/log.h"
#include "firmware/stager.h"
#include "node-agent/cli/commands.h"
#include "node-agent/cli/image_flags.h"
#include "node-agent/kernel/kmod_kernel.h"
#include "node-agent/kernel/udev_monitor.h"
#include "node-agent/reconcile/oci_image_store.h"
#include "node-agent/server/agent_state.h"
#include "node-agent/server/firmware_store.h"
#include "node-agent/server/image_gc.h"
#include "node-agent/server/local_service.h"
#include "node-agent/server/metrics.h"
#include "common/http/metrics_routes.h"
#include "node-agent/server/node_info.h"
#include "node-agent/server/reconciler.h"
#include "node-agent/server/sync_client.h"
#include "node-agent/server/udev_watch.h"
#include "node-agent/server/uninstall_policy.h"

#ifndef KMODD_VERSION
#define KMODD_VERSION "dev"
#endif

namespace kmodd::agent {

namespace {

namespace asio = boost::asio;

constexpr char kUsage[] =
    "usage: kmodd-agent run [--node-name NAME] [--controller HOST:PORT]\n"
    "                       [--cert FILE --key FILE --ca FILE | --ca FILE --token-file FILE\n"
    "                        | --insecure]\n"
    "                       [--state-dir DIR] [--firmware-dir DIR] [--firmware-class-path]\n"
    "                       [--host-root DIR]\n"
    "                       [--cache DIR] [--pull-secret FILE] [--registry-ca FILE]\n"
    "                       [--socket PATH] [--metrics ADDR:PORT] [--label K=V]...\n"
    "                       [--log-level debug|info|warn|error]\n"
    "  Runs the agent: reconciles this node to the desired state the controller pushes,\n"
    "  and, at once on start, to the last one it accepted (STATE/desired.pb), so that a\n"
    "  node comes back by itself after a reboot. Without --controller it runs from that\n"
    "  persisted state only. A lost controller changes nothing on the node. Stopped while\n"
    "  the controller's last state has no Modules and nothing of kmodd's is loaded (as at\n"
    "  uninstall), it removes its state directory and socket.\n";

// Unused image trees are removed this often (never the trees of the desired state).
constexpr auto kImageGcPeriod = std::chrono::minutes(10);

struct RunOptions {
  std::string node_name;
  std::string controller;
  std::string cert_file, key_file, ca_file;
  std::string token_file;
  bool insecure = false;
  std::string state_dir = "/var/lib/kmodd";
  std::string firmware_dir = "/var/lib/firmware";
  bool firmware_class_path = false;
  std::string host_root = "/";
  std::string cache;
  std::string pull_secret_file;
  std::string registry_ca;
  std::string socket = "/run/kmodd/agent.sock";
  std::string metrics = "127.0.0.1:9464";
  std::map<std::string, std::string> labels;
  LogLevel log_level = LogLevel::kInfo;
};

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) {
    return "";
  }
  return buf;
}

// Returns an exit code when parsing ends the command (help, usage error).
std::optional<int> Parse(const std::vector<std::string>& args, RunOptions& o) {
  flags::FlagSet flags("kmodd-agent run", kUsage);
  flags.String("--node-name", "NAME", "default: the hostname; must be the CN of --cert",
               &o.node_name);
  flags.String("--controller", "HOST:PORT",
               "where the controller listens; without it, the persisted state only",
               &o.controller);
  flags.String("--cert", "FILE", "mTLS to the controller: this agent's certificate", &o.cert_file);
  flags.String("--key", "FILE", "mTLS to the controller: this agent's key", &o.key_file);
  flags.String("--ca", "FILE",
               "the controller's certificate must chain to it; required unless\n--insecure",
               &o.ca_file);
  flags.String("--token-file", "FILE",
               "Kubernetes: show this projected service-account token\n"
               "(audience kmodd) instead of a client certificate; the\n"
               "token and --ca are read again before every connect",
               &o.token_file);
  flags.Switch("--insecure", "plain text to the controller (tests, demos)", &o.insecure);
  flags.String("--state-dir", "DIR",
               "journal, persisted desired state, firmware ledger\n(default /var/lib/kmodd)",
               &o.state_dir);
  flags.String("--firmware-dir", "DIR", "where firmware is staged (default /var/lib/firmware)",
               &o.firmware_dir);
  flags.Switch("--firmware-class-path",
               "point the kernel's firmware_class.path at the firmware dir\n"
               "while any module needs firmware",
               &o.firmware_class_path);
  flags.String("--host-root", "DIR",
               "where the host's / is mounted (default /), to find the host's\n"
               "/lib/firmware files that staged firmware shadows",
               &o.host_root);
  flags.String("--cache", "DIR", "image cache (default STATE/images)", &o.cache);
  flags.String("--pull-secret", "FILE", ".dockerconfigjson used when the desired state brings none",
               &o.pull_secret_file);
  flags.String("--registry-ca", "FILE", "extra CAs for registries", &o.registry_ca);
  flags.String("--socket", "PATH",
               "local Agent service (default /run/kmodd/agent.sock); bound\n"
               "in a 0700 directory: PATH.d (linked from PATH) when PATH's\n"
               "directory is not the agent's alone; only root may connect",
               &o.socket);
  flags.String("--metrics", "ADDR:PORT",
               "/metrics and /healthz (default 127.0.0.1:9464; \"\" = off)", &o.metrics)
      .AllowEmpty();
  flags.KeyValues("--label", "K=V", "sent in NodeInfo.labels (repeatable)", &o.labels);
  flags.Enum("--log-level", "LEVEL", "debug, info (default), warn or error", &o.log_level,
             {{"debug", LogLevel::kDebug},
              {"info", LogLevel::kInfo},
              {"warn", LogLevel::kWarn},
              {"error", LogLevel::kError}});
  if (std::optional<int> exit = flags.ParseOrExit(args, std::cout, std::cerr)) {
    return exit;
  }
  if (o.node_name.empty()) {
    o.node_name = Hostname();
  }
  if (o.cache.empty()) {
    o.cache = o.state_dir + "/images";
  }
  const bool by_cert = !o.cert_file.empty() && !o.key_file.empty() && o.token_file.empty();
  const bool by_token = o.cert_file.empty() && o.key_file.empty() && !o.token_file.empty();
  if (!o.controller.empty() && !o.insecure && (o.ca_file.empty() || (!by_cert && !by_token))) {
    return flags.UsageError(
        std::cerr,
        "--controller needs --ca and either --cert and --key or --token-file (or --insecure)");
  }
  return std::nullopt;
}

std::string MetricsText(const Metrics& metrics, const AgentState& state) {
  MetricsSnapshot m = metrics.Snapshot();
  const AgentSnapshot s = state.Snapshot();
  m.controller_connected = s.controller.connected;
  for (const auto& mod : s.modules) {
    ++m.modules_by_phase[mod.phase];
  }
  return RenderMetrics(m);
}

}  // namespace

int RunCommand(const std::vector<std::string>& args) {
  RunOptions o;
  if (auto code = Parse(args, o)) {
    return *code;
  }
  Logger log(stderr, o.log_level);
  auto fail = [&log](const std::string& what, const absl::Status& s) {
    log.Error(what, {{"error", std::string(s.message())}});
    return 1;
  };
  std::error_code ec;
  std::filesystem::create_directories(o.state_dir, ec);
  if (ec) {
    return fail("cannot create the state directory", ErrnoStatus(ec.value(), "mkdir", o.state_dir));
  }

  firmware::StagerOptions fo;
  fo.firmware_dir = o.firmware_dir;
  fo.ledger_path = o.state_dir + "/firmware-ledger.json";
  if (o.firmware_class_path) {
    fo.class_path_param = "/sys/module/firmware_class/parameters/path";
  }
  auto stager = firmware::Stager::Open(fo);
  if (!stager.ok()) {
    return fail("cannot open the firmware ledger", stager.status());
  }
  NodeFacts facts = ReadNodeFacts(o.node_name, o.labels);
  facts.agent_version = KMODD_VERSION;
  LockedStagerStore firmware_store(
      std::move(*stager), LockedStagerStore::ShadowOptions{
                              o.host_root, "/sys/module/firmware_class/parameters/path",
                              facts.kernel_release});
  kernel::KmodKernel kernel(kernel::KmodKernel::Options{});
  image::ImageCache cache(o.cache, BeastFactory());
  std::string default_secret;
  if (!o.pull_secret_file.empty()) {
    auto secret = ReadFile(o.pull_secret_file);
    if (!secret.ok()) {
      return fail("cannot read the pull secret", secret.status());
    }
    default_secret = *secret;
  }

  // The one real time source; everything below reads and waits on it.
  const RealClock clock;
  AgentState state(clock);
  Metrics metrics;
  ReconcilerOptions ro;
  ro.journal_path = o.state_dir + "/journal.json";
  ro.image_store = [&cache, &o, &default_secret](const std::string& secret) {
    reconcile::OciImageStore::Options io;
    io.ca_file = o.registry_ca;
    io.pull_secret = secret.empty() ? default_secret : secret;
    return std::make_unique<reconcile::OciImageStore>(cache, io);
  };
  Reconciler reconciler(kernel, &firmware_store, state, metrics, log, clock, ro);
  const std::string desired_path = o.state_dir + "/desired.pb";
  if (auto persisted = LoadPersistedDesired(desired_path, log)) {
    log.Info("re-applying the persisted desired state",
             {{"version", persisted->version},
              {"modules", static_cast<int64_t>(persisted->modules.size())}});
    reconciler.SetDesired(std::move(*persisted));
  }
  // Before any controller: a node whose network driver is ours comes back by itself.
  if (auto s = reconciler.Start(); !s.ok()) {
    return fail("cannot start the reconciler", s);
  }

  LocalServiceDeps deps;
  deps.state = &state;
  deps.reconciler = &reconciler;
  deps.facts = facts;
  deps.firmware = [&firmware_store] { return firmware_store.List(); };
  deps.shadowed = [&firmware_store](const std::vector<std::string>& paths) {
    return firmware_store.Shadowed(paths);
  };
  deps.firmware_dir = firmware_store.directory();
  deps.cache = &cache;
  LocalService service(std::move(deps), clock);
  auto local = LocalServer::Start(o.socket, service, &log);
  if (!local.ok()) {
    return fail("cannot serve the local Agent service", local.status());
  }

  std::unique_ptr<SyncClient> sync;
  if (!o.controller.empty()) {
    SyncClientOptions so;
    so.target = o.controller;
    so.insecure = o.insecure;
    so.desired_path = desired_path;
    if (!o.insecure && !o.token_file.empty()) {
      // Both read again before every connect: the kubelet rotates the token, and the CA's
      // ConfigMap may appear only after the controller first starts.
      so.ca_file = o.ca_file;
      so.token_file = o.token_file;
    } else if (!o.insecure) {
      auto ca = ReadFile(o.ca_file);
      auto cert = ReadFile(o.cert_file);
      auto key = ReadFile(o.key_file);
      for (const auto* f : {&ca, &cert, &key}) {
        if (!f->ok()) {
          return fail("cannot read the TLS files", f->status());
        }
      }
      so.ca_pem = *ca;
      so.cert_pem = *cert;
      so.key_pem = *key;
    }
    sync = std::make_unique<SyncClient>(
        so, facts, state,
        [&reconciler](DesiredState d) { reconciler.SetDesired(std::move(d)); }, log);
    sync->Start();
  }

  asio::io_context io;
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int sig) {
    log.Info("shutting down; modules stay loaded", {{"signal", sig}});
    io.stop();
  });
  std::unique_ptr<UdevWatch> udev;
  if (auto monitor = kernel::UdevMonitor::Open(); monitor.ok()) {
    udev = std::make_unique<UdevWatch>(
        io, std::make_unique<UdevEvents>(std::move(*monitor)),
        [&reconciler] { reconciler.Kick(); }, state, log);
    udev->Arm();
    reconciler.Kick();  // events before the subscription are not seen: look once more
  } else {
    log.Warn("no kernel uevents: drift is seen at the periodic resync only",
             {{"error", std::string(monitor.status().message())}});
  }
  std::unique_ptr<DeviceWatch> devices;
  if (auto events = kernel::DeviceEvents::Open(); events.ok()) {
    devices = std::make_unique<DeviceWatch>(io, std::move(*events),
                                            [&reconciler] { reconciler.DevicesChanged(); });
    devices->Arm();
  } else {
    log.Warn("no device uevents: readiness checks of devices list them every 250 ms instead",
             {{"error", std::string(events.status().message())}});
    reconciler.PollDevices();
  }
  ImageGc gc(clock, kImageGcPeriod,
                     [&] { return PruneUnusedImages(reconciler, cache, state); }, log);
  gc.Start();
  std::unique_ptr<http::Server> metrics_server;
  if (!o.metrics.empty()) {
    http::HttpHandlers h;
    h.metrics = [&metrics, &state] { return MetricsText(metrics, state); };
    h.healthy = [&reconciler] { return !reconciler.Wedged(); };
    auto m = http::Server::Start(http::MetricsServerOptions(o.metrics), http::MetricsRoutes(std::move(h)), log);
    if (!m.ok()) {
      return fail("cannot serve metrics", m.status());
    }
    metrics_server = std::move(*m);
  }
  log.Info("agent running", {{"node", o.node_name},
                             {"controller", o.controller.empty() ? "none" : o.controller},
                             {"socket", o.socket},
                             {"metrics", o.metrics}});
  io.run();

  if (metrics_server) {
    metrics_server->Stop();  // before what its handlers read
  }
  gc.Stop();
  if (sync) {
    sync->Stop();
  }
  (*local)->Stop();
  reconciler.Stop();
  (void)UninstallPolicy(o.state_dir, o.socket, log).AtStop();
  log.Info("stopped");
  return 0;
}

}  // namespace kmodd::agent

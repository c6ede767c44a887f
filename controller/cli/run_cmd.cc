// `kmodd-controller run`: the standalone controller. Modules from a watched directory,
// nodes from the agents that connect, desired state pushed over the Sync stream, status
// written to a file. This file only wires the parts together.

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <ostream>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/file.h"
#include "common/flags.h"
#include "common/http/metrics_routes.h"
#include "common/http/server.h"
#include "common/log.h"
#include "controller/cli/commands.h"
#include "controller/cli/kube_security.h"
#include "common/clock.h"
#include "controller/kube/config.h"
#include "controller/kube/events.h"
#include "controller/kube/leader.h"
#include "controller/kube/rest_client.h"
#include "controller/kube_mode/drainer.h"
#include "controller/kube_mode/kube_writer.h"
#include "controller/kube_mode/preflight_validations.h"
#include "controller/server/hub.h"
#include "controller/server/metrics.h"
#include "controller/server/status_writer.h"
#include "controller/server/sync_server.h"
#include "controller/source/dir_source.h"
#include "controller/kube_mode/kube_source.h"

namespace kmodd::cli {

namespace {

constexpr char kUsage[] =
    "usage: kmodd-controller run (--modules-dir DIR |\n"
    "                             --kubernetes [--kubeconfig FILE] --namespace NS\n"
    "                             [--leader-elect]) [--listen HOST:PORT]\n"
    "                            (--cert FILE --key FILE --ca FILE | --insecure)\n"
    "                            [--status-file FILE] [--forget-after SECONDS]\n"
    "                            [--metrics ADDR:PORT]\n"
    "                            [--log-level debug|info|warn|error]\n"
    "                            [--sync-max-connections-per-peer N]\n"
    "                            [--sync-max-streams-per-connection N]\n";

constexpr char kNotes[] =
    "Kubernetes mode: without --cert/--key/--ca the certificates are self-managed (Secret\n"
    "kmodd-controller-tls, CA in ConfigMap kmodd-ca); agents may show a projected token.\n";

struct RunConfig {
  std::string modules_dir;
  bool kubernetes = false;
  std::string kubeconfig;
  std::string ns;
  bool leader_elect = false;
  server::ServerOptions server;
  std::string cert_file;
  std::string key_file;
  std::string ca_file;
  std::string webhook_listen;
  std::vector<std::string> cert_dns;
  std::vector<std::string> cert_ips;
  std::string status_file;  // empty: the default standalone, none in Kubernetes mode
  std::string metrics;      // empty: no metrics server
  int64_t forget_after_s = 600;
  LogLevel log_level = LogLevel::kInfo;
};

// 0 on success, else the exit code (the message is written).
int Parse(const std::vector<std::string>& args, RunConfig& c, std::ostream& out,
          std::ostream& err) {
  flags::FlagSet flags("kmodd-controller run", kUsage);
  flags.String("--modules-dir", "DIR",
               "Module manifests (*.yaml, *.yml, *.json), watched for changes", &c.modules_dir);
  flags.Switch("--kubernetes",
               "Modules and Nodes from the API server (in-cluster configuration,\n"
               "or --kubeconfig); status, node labels and events written back",
               &c.kubernetes);
  flags.String("--kubeconfig", "FILE", "the Kubernetes client configuration", &c.kubeconfig);
  flags.String("--namespace", "NS", "the controller's own namespace (its Lease)", &c.ns);
  flags.Switch("--leader-elect",
               "Lease kmodd-controller; only the leader serves agents and writes",
               &c.leader_elect);
  flags.String("--listen", "HOST:PORT", "where agents connect (default 127.0.0.1:7443)",
               &c.server.listen);
  flags.String("--cert", "FILE", "the controller's certificate (PEM)", &c.cert_file);
  flags.String("--key", "FILE", "the controller's key (PEM)", &c.key_file);
  flags.String("--ca", "FILE",
               "the CA that signs agents' certificates; an agent's certificate must\n"
               "name its node (CN or DNS SAN)",
               &c.ca_file);
  flags.Switch("--insecure",
               "plain text, no identity check (standalone tests and demos only;\n"
               "refused with --kubernetes, where it would hand any client any\n"
               "node's pull secrets)",
               &c.server.insecure);
  flags.String("--webhook-listen", "ADDR:PORT",
               "the Module admission webhook (HTTPS, /validate-module)", &c.webhook_listen);
  flags.Strings("--cert-dns", "NAME", "an extra name of the self-managed serving certificate",
                &c.cert_dns);
  flags.Strings("--cert-ip", "IP", "an extra IP of the self-managed serving certificate",
                &c.cert_ips);
  flags.String("--metrics", "ADDR:PORT",
               "Prometheus /metrics and /healthz in plain HTTP (default: none;\n"
               "the Deployment serves them on :9465)",
               &c.metrics);
  flags.String("--status-file", "FILE",
               "what `kmodd-controller status` reads; default\n"
               "/var/lib/kmodd/controller-status.yaml, none in Kubernetes mode (the\n"
               "Modules' status holds it; a follower's file shows no agents)",
               &c.status_file);
  flags.Int("--forget-after", "SECONDS",
            "seconds a disconnected node stays known (default 600)", &c.forget_after_s, {0});
  flags.Enum("--log-level", "LEVEL", "debug, info (default), warn or error", &c.log_level,
             {{"debug", LogLevel::kDebug},
              {"info", LogLevel::kInfo},
              {"warn", LogLevel::kWarn},
              {"error", LogLevel::kError}});
  flags.Int("--sync-max-connections-per-peer", "N",
            "connections with streams one address may hold\n"
            "(default 64; an agent needs one)",
            &c.server.limits.max_connections_per_peer, {1});
  flags.Int("--sync-max-streams-per-connection", "N",
            "concurrent streams on one connection\n(default 100; an agent needs one)",
            &c.server.limits.max_streams_per_connection, {1});
  flags.Notes(kNotes);
  if (std::optional<int> exit = flags.ParseOrExit(args, out, err)) {
    return *exit == 0 ? -1 : *exit;
  }
  if (c.kubernetes == !c.modules_dir.empty()) {
    return flags.UsageError(err, "give either --modules-dir or --kubernetes");
  }
  if (c.kubernetes && c.ns.empty()) {
    return flags.UsageError(err, "--kubernetes needs --namespace");
  }
  if (c.kubernetes && c.server.insecure) {
    // Over plain text no stream can be tied to a node, and the Kubernetes mode sends each
    // node the pull Secrets of its Modules: anyone who reaches the port could collect them.
    return flags.UsageError(
        err,
        "--kubernetes does not take --insecure: over plain text any client could claim any "
        "node and be handed its pull secrets. Leave --insecure out (the certificates are then "
        "self-managed and agents show their tokens) or give --cert, --key and --ca");
  }
  const bool any_tls = !c.cert_file.empty() || !c.key_file.empty() || !c.ca_file.empty();
  const bool self_managed = c.kubernetes && !any_tls;
  if (!c.kubernetes && (!c.webhook_listen.empty() || !c.cert_dns.empty() || !c.cert_ips.empty())) {
    return flags.UsageError(err, "--webhook-listen, --cert-dns and --cert-ip need --kubernetes");
  }
  if (!self_managed && (c.server.insecure == any_tls ||
                        (!c.server.insecure &&
                         (c.cert_file.empty() || c.key_file.empty() || c.ca_file.empty())))) {
    return flags.UsageError(err, c.kubernetes
                                     ? "give all of --cert, --key and --ca, or none (self-managed)"
                                     : "give either --cert, --key and --ca, or --insecure");
  }
  if (!c.kubernetes && c.status_file.empty()) {
    c.status_file = "/var/lib/kmodd/controller-status.yaml";
  }
  return 0;
}

std::string NewRunId();

// How often a rollout is planned again at most (HubOptions::rollout_batch): a node's turn
// comes at most this much after the report that frees its place.
constexpr std::chrono::milliseconds kRolloutBatch{20};
// Standalone mode: after a start, no rollout starts a node for this long, while the agents
// reconnect (HubOptions::rollout_settle). Agents retry after 100 ms to 30 s.
constexpr std::chrono::milliseconds kRolloutSettle{10000};

// --metrics: the server, or nullptr when not asked for; the error is logged.
absl::StatusOr<std::unique_ptr<http::Server>> StartMetrics(const std::string& listen,
                                                           server::Hub& hub,
                                                           std::function<uint64_t()> errors,
                                                           Logger& log) {
  if (listen.empty()) {
    return std::unique_ptr<http::Server>();
  }
  http::HttpHandlers h;
  h.metrics = [&hub, errors = std::move(errors)] {
    return server::RenderControllerMetrics(hub.Status(), hub.Counters(), errors ? errors() : 0);
  };
  return http::Server::Start(http::MetricsServerOptions(listen), http::MetricsRoutes(std::move(h)),
                             log);
}

std::string Identity() {
  if (const char* pod = std::getenv("POD_NAME"); pod != nullptr && *pod != '\0') {
    return pod;
  }
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0') {
    return host;
  }
  return "kmodd-controller";
}

// Waits for SIGTERM or SIGINT, forgetting long-gone agents every second.
void WaitForSignal(const sigset_t& signals, server::Hub& hub, Logger& log) {
  const timespec tick{1, 0};
  for (;;) {
    const int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig == SIGTERM || sig == SIGINT) {
      log.Info("shutting down", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
      return;
    }
    if (sig < 0 && errno != EAGAIN && errno != EINTR) {
      log.Error("sigtimedwait failed", {{"error", ErrnoStatus(errno, "sigtimedwait", "").ToString()}});
      return;
    }
    (void)hub.ForgetGone();
    hub.Tick();
  }
}

// Kubernetes mode: the hub fed by the API server, the writer writing back, the Sync server
// serving agents only while leading.
int RunKubernetes(const RunConfig& c, const sigset_t& signals, const std::string& run_id,
                  Logger& log) {
  absl::StatusOr<kube::KubeConfig> config =
      c.kubeconfig.empty() ? kube::InClusterConfig() : kube::LoadKubeconfig(c.kubeconfig);
  if (!config.ok()) {
    log.Error("cannot read the Kubernetes configuration", {{"error", config.status().ToString()}});
    return 1;
  }
  RealClock clock;
  absl::StatusOr<std::unique_ptr<kube::RestKubeClient>> client =
      kube::RestKubeClient::Create(*config, clock);
  if (!client.ok()) {
    log.Error("cannot make the Kubernetes client", {{"error", client.status().ToString()}});
    return 1;
  }
  server::HubOptions hub_options{run_id, std::chrono::seconds(c.forget_after_s)};
  hub_options.nodes_from_api = true;
  hub_options.wait_for_plugin_pods = true;
  hub_options.wait_for_policies = true;
  hub_options.rollout_batch = kRolloutBatch;
  // ModulePolicy drains (kube_mode/drainer.h): the hub queues, the drainer's thread works.
  // The slot is emptied (under its lock) before the drainer goes, so that a hub thread
  // never reaches a destroyed drainer.
  struct DrainerSlot {
    std::mutex mu;
    source::Drainer* drainer = nullptr;
  };
  auto slot = std::make_shared<DrainerSlot>();
  hub_options.drain = [slot](const server::DrainRequest& r) {
    std::lock_guard lock(slot->mu);
    if (slot->drainer != nullptr) {
      slot->drainer->Request(r);
    }
  };
  hub_options.undrain = [slot](const std::string& node, const std::string& module) {
    std::lock_guard lock(slot->mu);
    if (slot->drainer != nullptr) {
      slot->drainer->Release(node, module);
    }
  };
  server::Hub hub(hub_options, clock, log);
  source::Drainer drainer(**client, log, clock,
                          [&hub](const server::DrainRequest& r, bool drained, const std::string& m) {
                            hub.DrainDone(r.node, r.module, r.target, drained, m);
                          });
  struct SlotReset {
    std::shared_ptr<DrainerSlot> slot;
    ~SlotReset() {
      std::lock_guard lock(slot->mu);
      slot->drainer = nullptr;
    }
  } slot_reset{slot};
  {
    std::lock_guard lock(slot->mu);
    slot->drainer = &drainer;
  }
  drainer.Start();
  const std::string identity = Identity();
  std::unique_ptr<kube::LeaderElector> elector;
  std::thread elector_thread;
  http::Cancellation stop_electing;
  if (c.leader_elect) {
    hub.SetActive(false);
    kube::LeaderElectionConfig le;
    le.lease_namespace = c.ns;
    le.lease_name = "kmodd-controller";
    le.identity = identity;
    le.on_started_leading = [&hub, &log] {
      log.Info("started leading: serving agents and writing status");
      hub.SetActive(true);
    };
    le.on_stopped_leading = [&hub, &log] {
      log.Warn("stopped leading: ending agents' streams, writing nothing");
      hub.SetActive(false);
    };
    elector = std::make_unique<kube::LeaderElector>(**client, le, clock);
  }
  // The status file, when asked for: the same document as in standalone mode, for
  // `kmodd-controller status` next to the controller.
  std::optional<server::StatusWriter> status;
  if (!c.status_file.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(c.status_file).parent_path(), ec);
    status.emplace(hub, c.status_file, clock, log);
    status->Start();
  }
  source::KubeSource source(**client, hub, clock, log);
  // "kmm" as KMM's manager writes its Events (source.component, reportingComponent), so
  // that what filters on them finds kmodd's too.
  kube::EventRecorder events(**client, clock, "kmm", identity);
  server::KubeWriter writer(**client, hub, source, events,
                            [&elector] { return !elector || elector->IsLeader(); }, clock, log);
  source.Start();
  // KMM's PreflightValidation objects, checked by the leader (controller/preflight).
  source::PreflightValidations preflights(**client, clock, log,
                                          [&elector] { return !elector || elector->IsLeader(); });
  preflights.Start();
  server::ServerOptions sync_options = c.server;
  KubeSecurity security(**client,
                        {c.ns, c.webhook_listen, c.cert_dns, c.cert_ips, c.cert_file.empty()},
                        clock, log);
  if (absl::Status st = security.Start(sync_options); !st.ok()) {
    log.Error("cannot set up certificates, the webhook or token checks",
              {{"error", st.ToString()}});
    source.Stop();
    return 1;
  }
  server::SyncServer sync(hub, sync_options, log);
  if (absl::Status st = sync.Start(); !st.ok()) {
    log.Error("cannot start the sync server", {{"error", st.ToString()}});
    source.Stop();
    return 1;
  }
  security.RenewInto(&sync);
  if (elector) {
    elector_thread = std::thread([&elector, &stop_electing] { elector->Run(stop_electing); });
  }
  absl::StatusOr<std::unique_ptr<http::Server>> metrics =
      StartMetrics(c.metrics, hub, [&writer] { return writer.ReconcileErrors(); }, log);
  if (!metrics.ok()) {
    log.Error("cannot serve metrics", {{"listen", c.metrics}, {"error", metrics.status().ToString()}});
    security.Stop();
    sync.Shutdown();
    source.Stop();
    if (elector) {
      stop_electing.Cancel();
      elector_thread.join();
    }
    return 1;
  }
  writer.Start();
  log.Info("controller running (Kubernetes)", {{"run", run_id},
                                               {"namespace", c.ns},
                                               {"identity", identity},
                                               {"leaderElect", c.leader_elect},
                                               {"statusFile", c.status_file},
                                               {"port", static_cast<int64_t>(sync.port())}});
  WaitForSignal(signals, hub, log);
  if (*metrics) {
    (*metrics)->Stop();  // before what its handler reads
  }
  writer.Stop();
  if (status) {
    status->Stop();
  }
  security.Stop();  // no renewal may reach the Sync server once it is going
  sync.Shutdown();
  preflights.Stop();
  source.Stop();
  if (elector) {
    stop_electing.Cancel();  // Run releases the lease: the next leader need not wait
    elector_thread.join();
  }
  return 0;
}

std::string NewRunId() {
  std::random_device rd;
  return absl::StrCat(absl::Hex(rd(), absl::kZeroPad8));
}

}  // namespace

int RunCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  RunConfig c;
  if (int rc = Parse(args, c, out, err); rc != 0) {
    return rc < 0 ? 0 : rc;
  }
  Logger log(stderr, c.log_level);
  if (!c.server.insecure && !c.cert_file.empty()) {
    for (auto [file, pem] : {std::pair{&c.cert_file, &c.server.cert_pem},
                             std::pair{&c.key_file, &c.server.key_pem},
                             std::pair{&c.ca_file, &c.server.ca_pem}}) {
      absl::StatusOr<std::string> text = ReadFile(*file);
      if (!text.ok()) {
        log.Error("cannot read a TLS file", {{"error", text.status().ToString()}});
        return 1;
      }
      *pem = *std::move(text);
    }
    // The Sync server reads them again every minute: replaced files are served without a
    // restart.
    c.server.cert_file = c.cert_file;
    c.server.key_file = c.key_file;
    c.server.ca_file = c.ca_file;
  } else if (c.server.insecure) {
    log.Warn("plain-text Sync server (--insecure): any client can claim any node");
  }

  // Signals are taken synchronously by this thread; every thread started below inherits
  // the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const std::string run_id = NewRunId();
  if (c.kubernetes) {
    return RunKubernetes(c, signals, run_id, log);
  }
  RealClock clock;
  server::HubOptions hub_options{run_id, std::chrono::seconds(c.forget_after_s)};
  hub_options.rollout_batch = kRolloutBatch;
  hub_options.rollout_settle = kRolloutSettle;
  server::Hub hub(hub_options, clock, log);

  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(c.status_file).parent_path(), ec);
  server::StatusWriter status(hub, c.status_file, clock, log);
  status.Start();

  // Modules first: the first agents must get a plan made from every Module.
  source::DirSource modules(c.modules_dir, clock, log);
  if (absl::Status st = modules.Start(
          [&hub](const source::SourceUpdate& u) { hub.ApplySource(u); });
      !st.ok()) {
    log.Error("cannot read the modules directory", {{"error", st.ToString()}});
    return 1;
  }
  server::SyncServer sync(hub, c.server, log);
  if (absl::Status st = sync.Start(); !st.ok()) {
    log.Error("cannot start the sync server", {{"error", st.ToString()}});
    modules.Stop();
    return 1;
  }
  absl::StatusOr<std::unique_ptr<http::Server>> metrics = StartMetrics(c.metrics, hub, {}, log);
  if (!metrics.ok()) {
    log.Error("cannot serve metrics", {{"listen", c.metrics}, {"error", metrics.status().ToString()}});
    modules.Stop();
    sync.Shutdown();
    return 1;
  }
  log.Info("controller running", {{"run", run_id},
                                  {"modulesDir", c.modules_dir},
                                  {"statusFile", c.status_file},
                                  {"metrics", c.metrics}});

  WaitForSignal(signals, hub, log);
  if (*metrics) {
    (*metrics)->Stop();
  }
  modules.Stop();
  sync.Shutdown();
  status.Stop();
  return 0;
}

}  // namespace kmodd::cli

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
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/file.h"
#include "common/log.h"
#include "controller/cli/commands.h"
#include "controller/cli/kube_security.h"
#include "common/clock.h"
#include "controller/kube/config.h"
#include "controller/kube/events.h"
#include "controller/kube/leader.h"
#include "controller/kube/rest_client.h"
#include "controller/kube_mode/kube_writer.h"
#include "controller/server/hub.h"
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
    "                            [--log-level debug|info|warn|error]\n"
    "                            [--sync-max-connections-per-peer N]\n"
    "                            [--sync-max-streams-per-connection N]\n"
    "  --modules-dir   Module manifests (*.yaml, *.yml, *.json), watched for changes\n"
    "  --kubernetes    Modules and Nodes from the API server (in-cluster configuration,\n"
    "                  or --kubeconfig); status, node labels and events written back\n"
    "  --namespace     the controller's own namespace (its Lease)\n"
    "  --leader-elect  Lease kmodd-controller; only the leader serves agents and writes\n"
    "  --listen        where agents connect (default 127.0.0.1:7443)\n"
    "  --cert, --key   the controller's certificate and key (PEM)\n"
    "  --ca            the CA that signs agents' certificates; an agent's certificate must\n"
    "                  name its node (CN or DNS SAN)\n"
    "  --insecure      plain text, no identity check (standalone tests and demos only;\n"
    "                  refused with --kubernetes, where it would hand any client any\n"
    "                  node's pull secrets)\n"
    "  Kubernetes mode: without --cert/--key/--ca the certificates are self-managed (Secret\n"
    "  kmodd-controller-tls, CA in ConfigMap kmodd-ca); agents may show a projected token.\n"
    "  --webhook-listen ADDR:PORT  the Module admission webhook (HTTPS, /validate-module)\n"
    "  --cert-dns NAME, --cert-ip IP  extra names of the self-managed serving certificate\n"
    "  --status-file   what `kmodd-controller status` reads; default\n"
    "                  /var/lib/kmodd/controller-status.yaml, none in Kubernetes mode (the\n"
    "                  Modules' status holds it; a follower's file shows no agents)\n"
    "  --forget-after  seconds a disconnected node stays known (default 600)\n"
    "  --sync-max-connections-per-peer N  connections with streams one address may hold\n"
    "                  (default 64; an agent needs one)\n"
    "  --sync-max-streams-per-connection N  concurrent streams on one connection\n"
    "                  (default 100; an agent needs one)\n";

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
  int64_t forget_after_s = 600;
  LogLevel log_level = LogLevel::kInfo;
};

bool ParseLevel(const std::string& s, LogLevel& out) {
  if (s == "debug") {
    out = LogLevel::kDebug;
  } else if (s == "info") {
    out = LogLevel::kInfo;
  } else if (s == "warn") {
    out = LogLevel::kWarn;
  } else if (s == "error") {
    out = LogLevel::kError;
  } else {
    return false;
  }
  return true;
}

// 0 on success, else the exit code (the message is written).
int Parse(const std::vector<std::string>& args, RunConfig& c, std::ostream& out,
          std::ostream& err) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has_value = i + 1 < args.size();
    if (a == "--modules-dir" && has_value) {
      c.modules_dir = args[++i];
    } else if (a == "--kubernetes") {
      c.kubernetes = true;
    } else if (a == "--kubeconfig" && has_value) {
      c.kubeconfig = args[++i];
    } else if (a == "--namespace" && has_value) {
      c.ns = args[++i];
    } else if (a == "--leader-elect") {
      c.leader_elect = true;
    } else if (a == "--listen" && has_value) {
      c.server.listen = args[++i];
    } else if (a == "--cert" && has_value) {
      c.cert_file = args[++i];
    } else if (a == "--key" && has_value) {
      c.key_file = args[++i];
    } else if (a == "--ca" && has_value) {
      c.ca_file = args[++i];
    } else if (a == "--insecure") {
      c.server.insecure = true;
    } else if (a == "--webhook-listen" && has_value) {
      c.webhook_listen = args[++i];
    } else if (a == "--cert-dns" && has_value) {
      c.cert_dns.push_back(args[++i]);
    } else if (a == "--cert-ip" && has_value) {
      c.cert_ips.push_back(args[++i]);
    } else if (a == "--status-file" && has_value) {
      c.status_file = args[++i];
    } else if (a == "--forget-after" && has_value) {
      if (!absl::SimpleAtoi(args[++i], &c.forget_after_s) || c.forget_after_s < 0) {
        err << "error: --forget-after " << args[i] << ": expected whole seconds\n";
        return 2;
      }
    } else if ((a == "--sync-max-connections-per-peer" ||
                a == "--sync-max-streams-per-connection") &&
               has_value) {
      int& limit = a == "--sync-max-connections-per-peer"
                       ? c.server.limits.max_connections_per_peer
                       : c.server.limits.max_streams_per_connection;
      if (!absl::SimpleAtoi(args[++i], &limit) || limit < 1) {
        err << "error: " << a << " " << args[i] << ": expected a whole number of at least 1\n";
        return 2;
      }
    } else if (a == "--log-level" && has_value) {
      if (!ParseLevel(args[++i], c.log_level)) {
        err << "error: --log-level " << args[i] << ": expected debug, info, warn or error\n";
        return 2;
      }
    } else if (a == "-h" || a == "--help") {
      out << kUsage;
      return -1;
    } else {
      err << "error: unexpected argument \"" << a << "\"\n" << kUsage;
      return 2;
    }
  }
  if (c.kubernetes == !c.modules_dir.empty()) {
    err << "error: give either --modules-dir or --kubernetes\n" << kUsage;
    return 2;
  }
  if (c.kubernetes && c.ns.empty()) {
    err << "error: --kubernetes needs --namespace\n" << kUsage;
    return 2;
  }
  if (c.kubernetes && c.server.insecure) {
    // Over plain text no stream can be tied to a node, and the Kubernetes mode sends each
    // node the pull Secrets of its Modules: anyone who reaches the port could collect them.
    err << "error: --kubernetes does not take --insecure: over plain text any client could "
           "claim any node and be handed its pull secrets. Leave --insecure out (the "
           "certificates are then self-managed and agents show their tokens) or give --cert, "
           "--key and --ca\n"
        << kUsage;
    return 2;
  }
  const bool any_tls = !c.cert_file.empty() || !c.key_file.empty() || !c.ca_file.empty();
  const bool self_managed = c.kubernetes && !any_tls;
  if (!c.kubernetes && (!c.webhook_listen.empty() || !c.cert_dns.empty() || !c.cert_ips.empty())) {
    err << "error: --webhook-listen, --cert-dns and --cert-ip need --kubernetes\n" << kUsage;
    return 2;
  }
  if (!self_managed && (c.server.insecure == any_tls ||
                        (!c.server.insecure &&
                         (c.cert_file.empty() || c.key_file.empty() || c.ca_file.empty())))) {
    err << (c.kubernetes ? "error: give all of --cert, --key and --ca, or none (self-managed)\n"
                         : "error: give either --cert, --key and --ca, or --insecure\n")
        << kUsage;
    return 2;
  }
  if (!c.kubernetes && c.status_file.empty()) {
    c.status_file = "/var/lib/kmodd/controller-status.yaml";
  }
  return 0;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string NewRunId();

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
  server::Hub hub(hub_options, NowMs, log);
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
    status.emplace(hub, c.status_file, log);
    status->Start();
  }
  source::KubeSource source(**client, hub, clock, log);
  // "kmm" as KMM's manager writes its Events (source.component, reportingComponent), so
  // that what filters on them finds kmodd's too.
  kube::EventRecorder events(**client, clock, "kmm", identity);
  server::KubeWriter writer(**client, hub, source, events,
                            [&elector] { return !elector || elector->IsLeader(); }, clock, log);
  source.Start();
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
  writer.Start();
  log.Info("controller running (Kubernetes)", {{"run", run_id},
                                               {"namespace", c.ns},
                                               {"identity", identity},
                                               {"leaderElect", c.leader_elect},
                                               {"statusFile", c.status_file},
                                               {"port", static_cast<int64_t>(sync.port())}});
  WaitForSignal(signals, hub, log);
  writer.Stop();
  if (status) {
    status->Stop();
  }
  security.Stop();  // no renewal may reach the Sync server once it is going
  sync.Shutdown();
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
  server::Hub hub({run_id, std::chrono::seconds(c.forget_after_s)}, NowMs, log);

  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(c.status_file).parent_path(), ec);
  server::StatusWriter status(hub, c.status_file, log);
  status.Start();

  // Modules first: the first agents must get a plan made from every Module.
  source::DirSource modules(c.modules_dir, log);
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
  log.Info("controller running", {{"run", run_id},
                                  {"modulesDir", c.modules_dir},
                                  {"statusFile", c.status_file}});

  WaitForSignal(signals, hub, log);
  modules.Stop();
  sync.Shutdown();
  status.Stop();
  return 0;
}

}  // namespace kmodd::cli

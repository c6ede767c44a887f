// The admission webhook under a flood of 3 MiB bodies: how long a valid Module waits for
// its answer while another client keeps sending the largest reviews the server accepts.
// The server runs in its own process (`serve`), so that the same client (`load`) measures
// a server built from any revision; tools/bench/webhook_flood/run puts two side by side.
//
//   webhook_flood serve PORT_FILE         the webhook's HTTPS server on 127.0.0.1, port 0,
//                                         until SIGTERM (its Routes(), a fresh CA)
//   webhook_flood load PORT [--flood N] [--body KIND] [--seconds S] [--interval-ms I]
//                                         N connections from 127.0.0.2 send KIND bodies in a
//                                         loop while, from 127.0.0.1, a valid Module is due
//                                         every I ms (each on its own thread, on a kept-alive
//                                         connection when one is idle); prints the median,
//                                         p99 and max of the time from due to answer
//   webhook_flood cost                    how long the webhook's route takes on each KIND,
//                                         in process
//
// KIND: mappings (a Module with ~25,000 kernelMappings, each validated: the costliest),
// labels (~100,000 labels), garbage (3 MiB that is not JSON).

#include <pthread.h>

#include <algorithm>
#include <csignal>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/flags.h"
#include "common/log.h"
#include "controller/certs/pki.h"
#include "controller/webhook/webhook_server.h"
// The raw client of the server's tests: it binds any loopback source address, so the flood
// and the probe are two clients.
#include "tests/common/http/raw_client.h"

namespace {

using Clock = std::chrono::steady_clock;
using kmodd::testing::TestResponse;
using kmodd::testing::RawClient;

constexpr size_t kBodyLimit = 3 << 20;  // the server's default, and the API server's cap

std::string Review(const std::string& module) {
  return absl::StrCat(
      R"({"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{)",
      R"("uid":"705ab4f5-6393-11e8-b7cc-42010a800002",)",
      R"("kind":{"group":"kmm.sigs.x-k8s.io","version":"v1beta1","kind":"Module"},)",
      R"("resource":{"group":"kmm.sigs.x-k8s.io","version":"v1beta1","resource":"modules"},)",
      R"("name":"kmm-ci-a","namespace":"kmm-demo","operation":"CREATE",)",
      R"("userInfo":{"username":"kubernetes-admin"},"object":)", module,
      R"(,"oldObject":null,"dryRun":false}})");
}

std::string Module(const std::string& labels, const std::string& mappings) {
  return absl::StrCat(
      R"({"apiVersion":"kmm.sigs.x-k8s.io/v1beta1","kind":"Module","metadata":{"name":"kmm-ci-a",)",
      R"("namespace":"kmm-demo","generation":1,"labels":{)", labels, R"(}},"spec":{)",
      R"("selector":{"node-role.kubernetes.io/worker":""},"moduleLoader":{"container":{)",
      R"("modprobe":{"moduleName":"kmm_ci_a"},"kernelMappings":[)", mappings, "]}}}}");
}

const char kMapping[] = R"({"regexp":"^6\\.1\\.0-N-cloud-amd64$",)"
                        R"("containerImage":"r.example/kmm-ci-a:$KERNEL_FULL_VERSION"})";

std::string ValidReview() {
  return Review(Module("", R"({"regexp":"^.+$","containerImage":"r.example/a:1"})"));
}

// The largest body of `kind` the server still reads (under kBodyLimit).
std::string FloodBody(const std::string& kind) {
  if (kind == "garbage") {
    return std::string(kBodyLimit - 1024, '[');
  }
  std::string items;
  const std::string shell = Review(Module("", ""));
  for (int i = 0; shell.size() + items.size() < kBodyLimit - 4096; ++i) {
    if (!items.empty()) {
      items += ',';
    }
    if (kind == "labels") {
      absl::StrAppend(&items, "\"example.com/label-", i, "\":\"value-", i, "\"");
    } else {
      std::string m = kMapping;
      m.replace(m.find('N'), 1, std::to_string(i));
      items += m;
    }
  }
  return kind == "labels" ? Review(Module(items, R"({"regexp":"^.+$","containerImage":"r/a:1"})"))
                          : Review(Module("", items));
}

int Serve(const std::string& port_file) {
  // Blocked before any thread starts, so that only sigwait below takes them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  kmodd::Logger log(stderr, kmodd::LogLevel::kWarn);
  const absl::Time now = absl::Now();
  absl::StatusOr<kmodd::certs::KeyPair> ca =
      kmodd::certs::MakeCa("webhook bench CA", now, absl::Hours(24));
  if (!ca.ok()) {
    std::fprintf(stderr, "%s\n", ca.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<kmodd::certs::KeyPair> cert = kmodd::certs::IssueServing(
      *ca, "webhook bench", {{"localhost"}, {"127.0.0.1"}}, now, absl::Hours(24));
  if (!cert.ok()) {
    std::fprintf(stderr, "%s\n", cert.status().ToString().c_str());
    return 1;
  }
  kmodd::http::ServerOptions o;
  o.listen = "127.0.0.1:0";
  auto server = kmodd::webhook::WebhookServer::Start(o, cert->cert_pem, cert->key_pem, log);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  std::ofstream(port_file) << (*server)->port() << "\n";
  int sig = 0;
  sigwait(&stop, &sig);
  return 0;
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

int Load(uint16_t port, int flood, const std::string& kind, int seconds, int interval_ms) {
  const std::string flood_request = kmodd::testing::PostRequest(FloodBody(kind));
  const std::string probe_body = ValidReview();
  std::atomic<bool> done{false};
  std::mutex mu;
  std::map<int, int> flood_statuses;  // 0: no answer (reset, timeout)
  std::vector<std::thread> flooders;
  flooders.reserve(static_cast<size_t>(flood));
  for (int i = 0; i < flood; ++i) {
    flooders.emplace_back([&] {
      std::unique_ptr<RawClient> c;
      while (!done) {
        if (!c) {
          c = std::make_unique<RawClient>("127.0.0.2", std::chrono::seconds(30));
          if (!c->Open(port)) {
            c.reset();
            std::lock_guard lock(mu);
            ++flood_statuses[-1];  // refused or failed to connect
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            continue;
          }
        }
        const bool sent = c->Send(flood_request);
        const std::optional<TestResponse> r = sent ? c->Receive() : std::nullopt;
        std::lock_guard lock(mu);
        ++flood_statuses[r ? r->status : 0];
        if (!r) {
          c.reset();
        }
      }
    });
  }
  if (flood > 0) {
    std::this_thread::sleep_for(std::chrono::seconds(1));  // the flood in full swing first
  }
  // A probe every interval, on its own thread, each counted from when it was due: a Module
  // created at any moment. Kept-alive connections are reused as the API server's HTTP
  // client reuses them (one idle is taken; a new one is opened when none is).
  std::vector<double> ms;
  int failed = 0;
  int refused = 0;
  std::vector<std::unique_ptr<RawClient>> idle;
  std::vector<std::thread> probes;
  const auto start = Clock::now();
  for (auto due = start; due < start + std::chrono::seconds(seconds);
       due += std::chrono::milliseconds(interval_ms)) {
    std::this_thread::sleep_until(due);
    probes.emplace_back([&, due] {
      std::unique_ptr<RawClient> c;
      {
        std::lock_guard lock(mu);
        if (!idle.empty()) {
          c = std::move(idle.back());
          idle.pop_back();
        }
      }
      if (!c) {
        c = std::make_unique<RawClient>("127.0.0.1", std::chrono::seconds(60));
        if (!c->Open(port)) {
          std::lock_guard lock(mu);
          ++failed;
          return;
        }
      }
      const std::optional<TestResponse> r = c->Post(probe_body);
      const double took = Ms(Clock::now() - due);
      std::lock_guard lock(mu);
      if (!r) {
        ++failed;
        return;
      }
      if (r->status != 200 || r->body.find("\"allowed\":true") == std::string::npos) {
        ++refused;
      } else {
        ms.push_back(took);
      }
      idle.push_back(std::move(c));
    });
  }
  for (std::thread& t : probes) {
    t.join();
  }
  done = true;
  for (std::thread& t : flooders) {
    t.join();
  }
  std::string statuses;
  for (const auto& [status, n] : flood_statuses) {
    absl::StrAppend(&statuses, statuses.empty() ? "" : ",", status, ":", n);
  }
  std::printf(
      "flood=%d kind=%s body_bytes=%zu probes=%zu failed=%d refused=%d median_ms=%.2f "
      "p99_ms=%.2f max_ms=%.2f under_100ms=%.1f%% flood_answers={%s}\n",
      flood, kind.c_str(), flood_request.size(), ms.size(), failed, refused,
      Percentile(ms, 0.5), Percentile(ms, 0.99), Percentile(ms, 1.0),
      ms.empty() ? 0.0
                 : 100.0 * static_cast<double>(std::count_if(ms.begin(), ms.end(),
                                                             [](double x) { return x < 100; })) /
                       static_cast<double>(ms.size()),
      statuses.c_str());
  return failed == 0 && refused == 0 ? 0 : 1;
}

int Cost() {
  const kmodd::http::Router routes = kmodd::webhook::Routes();
  auto review = [&routes](const std::string& body) {
    return routes.Route({"POST", "/validate-module", body, "127.0.0.1"}).status;
  };
  for (const std::string kind : {"mappings", "labels", "garbage"}) {
    const std::string body = FloodBody(kind);
    std::vector<double> ms;
    int status = 0;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = Clock::now();
      status = review(body);
      ms.push_back(Ms(Clock::now() - t0));
    }
    std::printf("kind=%s body_bytes=%zu status=%d median_ms=%.1f\n", kind.c_str(), body.size(),
                status, Percentile(ms, 0.5));
  }
  const std::string valid = ValidReview();
  const auto t0 = Clock::now();
  constexpr int kRuns = 1000;
  for (int i = 0; i < kRuns; ++i) {
    (void)review(valid);
  }
  std::printf("kind=valid body_bytes=%zu mean_ms=%.3f\n", valid.size(),
              Ms(Clock::now() - t0) / kRuns);
  return 0;
}

constexpr char kUsage[] =
    "usage: webhook_flood serve PORT_FILE\n"
    "       webhook_flood load PORT [--flood N] [--body mappings|labels|garbage] "
    "[--seconds S] [--interval-ms I]\n"
    "       webhook_flood cost\n";

int LoadCommand(const std::vector<std::string>& args) {
  int port = 0;
  int flood = 4;
  std::string kind = "mappings";
  int seconds = 10;
  int interval_ms = 50;
  kmodd::flags::FlagSet flags("webhook_flood load", kUsage);
  flags.Int("--flood", "N", "connections sending KIND bodies (default 4)", &flood, {1});
  flags.OneOf("--body", "KIND", "mappings (default), labels or garbage", &kind,
              {"mappings", "labels", "garbage"});
  flags.Int("--seconds", "S", "how long (default 10)", &seconds, {1});
  flags.Int("--interval-ms", "I", "a valid Module is due every I ms (default 50)", &interval_ms,
            {1});
  std::string port_text;
  flags.Positional("PORT", "the webhook's port on 127.0.0.1", &port_text);
  if (std::optional<int> exit = flags.ParseOrExit(args, std::cout, std::cerr)) {
    return *exit;
  }
  if (!absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535) {
    return flags.UsageError(std::cerr,
                            absl::StrCat("PORT \"", port_text, "\": want a port, 1 to 65535"));
  }
  return Load(static_cast<uint16_t>(port), flood, kind, seconds, interval_ms);
}

}  // namespace

int main(int argc, char** argv) {
  std::string command;
  std::vector<std::string> args;
  kmodd::flags::FlagSet flags("webhook_flood", kUsage);
  flags.Positional("COMMAND", "serve, load or cost", &command);
  flags.Rest("ARGS", "", &args);
  flags.StopAtFirstPositional();  // the rest is the command's
  if (std::optional<int> exit =
          flags.ParseOrExit(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr)) {
    return *exit;
  }
  if (command == "load") {
    return LoadCommand(args);
  }
  std::string port_file;
  kmodd::flags::FlagSet sub(absl::StrCat("webhook_flood ", command), kUsage);
  if (command == "serve") {
    sub.Positional("PORT_FILE", "where the port is written", &port_file);
  } else if (command != "cost") {
    return flags.UsageError(std::cerr, absl::StrCat("unknown command \"", command, "\""));
  }
  if (std::optional<int> exit = sub.ParseOrExit(args, std::cout, std::cerr)) {
    return *exit;
  }
  return command == "serve" ? Serve(port_file) : Cost();
}

// kmodd-loadgen: N simulated agents against a real controller, for fan-out benchmarks
// (tools/bench/fanout). Wires options, credentials and the fleet; the work is in fleet.cc.

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "tools/loadgen/fleet.h"
#include "tools/loadgen/options.h"
#include "tools/loadgen/summary.h"

namespace {

volatile std::sig_atomic_t g_interrupted = 0;

void OnSignal(int) { g_interrupted = 1; }

bool ReadFile(const std::string& path, std::string& out) {
  std::ifstream in(path);
  if (!in) {
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

// --since-file: a unix time in milliseconds.
bool ReadSince(const std::string& path, int64_t& since_ms) {
  std::string text;
  return ReadFile(path, text) && absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &since_ms);
}

// Waits for `done` as Fleet::WaitUntil does, printing the live streams and the attempts
// so far on stderr every 5 s (for a bench that gives up, what it saw last).
template <typename Pred>
bool WaitShowingProgress(kmodd::loadgen::Fleet& fleet, Pred done,
                         std::chrono::steady_clock::time_point deadline) {
  const int64_t since = absl::ToUnixMillis(absl::Now());
  for (;;) {
    const auto step = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    if (fleet.WaitUntil(done, std::min(step, deadline))) {
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return false;
    }
    const auto a = fleet.AttemptsSince(since);
    std::cerr << "progress: live " << fleet.live() << "/" << fleet.agents() << ", streams opened "
              << a.started << ", failed " << a.failed << " (in this wait)" << std::endl;
  }
}

// --reconnect: each time the fleet has lost streams and every agent is connected again,
// one JSON line. Times are from the --since-file mark (the bench writes it as it restarts
// the controller), or else from when the loss was seen; attempts count streams opened and
// streams that ended before any desired state, from the mark on.
void ReportRecoveries(kmodd::loadgen::Fleet& fleet, const kmodd::loadgen::Options& o,
                      const std::function<bool()>& interrupted) {
  const int n = fleet.agents();
  const auto forever = std::chrono::steady_clock::time_point::max();
  for (int cycle = 1; !interrupted(); ++cycle) {
    fleet.WaitUntil([&] { return fleet.live() < n || interrupted(); }, forever);
    if (interrupted()) {
      return;
    }
    const int64_t lost_ms = absl::ToUnixMillis(absl::Now());
    std::cerr << "cycle " << cycle << ": " << n - fleet.live() << " streams lost\n";
    WaitShowingProgress(fleet, [&] { return fleet.live() == n || interrupted(); }, forever);
    if (interrupted()) {
      return;
    }
    int64_t since_ms = lost_ms;
    if (!o.since_file.empty() && !ReadSince(o.since_file, since_ms)) {
      std::cerr << "error: --since-file " << o.since_file
                << " does not hold a unix time in milliseconds\n";
    }
    const auto summary =
        kmodd::loadgen::Summarize(n, n, fleet.LiveSinceTimes(), since_ms, /*timed_out=*/false);
    const auto after = fleet.AttemptsSince(since_ms);
    const auto before = fleet.AttemptsSince(lost_ms);
    // "acked" in the fan-out summary: here, agents connected again.
    std::string json = absl::StrReplaceAll(kmodd::loadgen::SummaryJson(summary),
                                           {{"\"acked\"", "\"reconnected\""}});
    json.pop_back();  // the closing brace
    std::cout << absl::StrCat("{\"event\":\"reconnected\",\"cycle\":", cycle, ",",
                              json.substr(1), ",\"attempts\":", after.started,
                              ",\"failed\":", after.failed,
                              ",\"failed_unavailable\":", after.failed_unavailable,
                              ",\"failed_before_mark\":", before.failed - after.failed, "}")
              << std::endl;
  }
}

}  // namespace

int main(int argc, char** argv) {
  using kmodd::loadgen::Fleet;
  auto options = kmodd::loadgen::ParseOptions(std::vector<std::string>(argv + 1, argv + argc));
  if (!options.ok()) {
    std::cerr << "error: " << options.status().message() << "\n\n" << kmodd::loadgen::kUsage;
    return 2;
  }
  if (!options->help.empty()) {
    std::cout << options->help;
    return 0;
  }
  const auto& o = *options;
  std::vector<std::shared_ptr<grpc::ChannelCredentials>> creds;  // one, or one per agent
  std::vector<std::string> tokens;  // --token-dir: one per agent
  auto trimmed = [](std::string token) {
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) {
      token.pop_back();
    }
    return token;
  };
  if (o.insecure) {
    creds.push_back(grpc::InsecureChannelCredentials());
  } else if (!o.cert_dir.empty()) {
    grpc::SslCredentialsOptions ssl;
    if (!ReadFile(o.ca_file, ssl.pem_root_certs)) {
      std::cerr << "error: cannot read --ca " << o.ca_file << "\n";
      return 1;
    }
    for (int i = 0; i < o.agents; ++i) {
      const std::string base = absl::StrCat(o.cert_dir, "/node-", o.name_prefix, i);
      if (!ReadFile(base + ".pem", ssl.pem_cert_chain) ||
          !ReadFile(base + ".key", ssl.pem_private_key)) {
        std::cerr << "error: --cert-dir: cannot read " << base << ".pem or .key\n";
        return 1;
      }
      creds.push_back(grpc::SslCredentials(ssl));
    }
  } else {
    grpc::SslCredentialsOptions ssl;
    std::string token;
    const bool by_token = !o.token_file.empty();
    const bool by_dir = !o.token_dir.empty();
    if (!ReadFile(o.ca_file, ssl.pem_root_certs) ||
        (by_token ? !ReadFile(o.token_file, token)
         : by_dir ? false
                  : !ReadFile(o.cert_file, ssl.pem_cert_chain) ||
                        !ReadFile(o.key_file, ssl.pem_private_key))) {
      std::cerr << "error: cannot read --ca, --cert, --key or --token-file\n";
      return 1;
    }
    for (int i = 0; by_dir && i < o.agents; ++i) {
      const std::string file = absl::StrCat(o.token_dir, "/", o.name_prefix, i);
      if (!ReadFile(file, token)) {
        std::cerr << "error: --token-dir: cannot read " << file << "\n";
        return 1;
      }
      tokens.push_back(trimmed(token));
    }
    creds.push_back(grpc::SslCredentials(ssl));
    if (by_token) {
      creds[0] =
          grpc::CompositeChannelCredentials(creds[0], grpc::AccessTokenCredentials(trimmed(token)));
    }
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);

  Fleet fleet(o, creds, std::move(tokens));
  const auto start = std::chrono::steady_clock::now();
  fleet.Start();
  const int n = fleet.agents();
  auto interrupted = [] { return g_interrupted != 0; };
  // Phases wait at most --wait-all-acked each; without it, until interrupted.
  auto deadline = [&] {
    return o.wait_all_acked_s > 0
               ? std::chrono::steady_clock::now() + std::chrono::seconds(o.wait_all_acked_s)
               : std::chrono::steady_clock::time_point::max();
  };
  auto wait_connected = [&](auto done, std::chrono::steady_clock::time_point until) {
    return o.reconnect ? WaitShowingProgress(fleet, done, until) : fleet.WaitUntil(done, until);
  };
  bool ok = wait_connected(
      [&] {
        // A reconnecting agent retries a stream that ended: only the connected count ends this.
        return fleet.connected() == n || (!o.reconnect && fleet.ended() == n) || interrupted();
      },
      deadline());
  const double connect_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (fleet.connected() == n) {
    std::cout << "connected " << n << std::endl;
    std::cerr << "all " << n << " agents connected in " << connect_s << " s over "
              << o.connections << " channels\n";
  } else {
    ok = false;
  }

  if (ok && !interrupted()) {
    if (o.reconnect) {
      ReportRecoveries(fleet, o, interrupted);
    } else if (o.wait_all_acked_s > 0) {
      ok = fleet.WaitUntil([&] { return fleet.changed_acked() == n || interrupted(); },
                           deadline()) &&
           !interrupted();
    } else if (o.until_version_count > 0) {
      ok = fleet.WaitUntil([&] { return fleet.ReceivedAtLeast(o.until_version_count) == n ||
                                        fleet.ended() == n || interrupted(); },
                           deadline()) &&
           fleet.ReceivedAtLeast(o.until_version_count) == n;
    } else {
      fleet.WaitUntil([&] { return fleet.ended() == n || interrupted(); }, deadline());
    }
  }
  const int connected = fleet.connected();
  fleet.Stop();

  int64_t since_ms = 0;
  if (!o.since_file.empty() && !o.reconnect) {
    if (!ReadSince(o.since_file, since_ms)) {
      std::cerr << "error: --since-file " << o.since_file
                << " does not hold a unix time in milliseconds\n";
      ok = false;
    }
  }
  const auto summary = kmodd::loadgen::Summarize(n, connected, fleet.ChangedAckTimes(), since_ms,
                                                 o.wait_all_acked_s > 0 && !ok);
  std::cout << kmodd::loadgen::SummaryJson(summary) << std::endl;
  for (const auto& e : fleet.Errors()) {
    std::cerr << "stream error: " << e << "\n";
  }
  if (!o.report_file.empty()) {
    std::ofstream(o.report_file) << fleet.ReportJsonLines();
  }
  if (!o.timeline_file.empty()) {
    std::ofstream(o.timeline_file) << fleet.TimelineJsonLines();
  }
  return ok ? 0 : 1;
}

// kmodd-loadgen: N simulated agents against a real controller, for fan-out benchmarks
// (tools/bench/fanout). Wires options, credentials and the fleet; the work is in fleet.cc.

#include <csignal>
#include <fstream>
#include <iostream>
#include <sstream>

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
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

}  // namespace

int main(int argc, char** argv) {
  using kmodd::loadgen::Fleet;
  auto options = kmodd::loadgen::ParseOptions(std::vector<std::string>(argv + 1, argv + argc));
  if (!options.ok()) {
    std::cerr << "error: " << options.status().message() << "\n\n" << kmodd::loadgen::kUsage;
    return 2;
  }
  const auto& o = *options;
  std::shared_ptr<grpc::ChannelCredentials> creds;
  std::vector<std::string> tokens;  // --token-dir: one per agent
  auto trimmed = [](std::string token) {
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) {
      token.pop_back();
    }
    return token;
  };
  if (o.insecure) {
    creds = grpc::InsecureChannelCredentials();
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
    creds = grpc::SslCredentials(ssl);
    if (by_token) {
      creds = grpc::CompositeChannelCredentials(creds, grpc::AccessTokenCredentials(trimmed(token)));
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
  bool ok = fleet.WaitUntil(
      [&] { return fleet.connected() == n || fleet.ended() == n || interrupted(); }, deadline());
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
    if (o.wait_all_acked_s > 0) {
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
  if (!o.since_file.empty()) {
    std::string text;
    if (!ReadFile(o.since_file, text) ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &since_ms)) {
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
  return ok ? 0 : 1;
}

// Hub::Report benchmark: what one node's report of N module entries (100,000 by default)
// costs the controller, and how much of it holds the hub's lock (which every other agent's
// hello and report waits on).
//
//   before  the algorithm of Hub::Report before issue 12 A2, kept below as a reference:
//           convert, sort, then find each entry in the previous report by linear search
//           (and each previous entry in the new one), all under the lock. O(n^2).
//   after   Hub::Report itself on a node allowed to report every entry (the entries are
//           Modules with kmodd's finalizer from an earlier run), the cap raised to N;
//           then only its part under the lock (FilterReport + PhaseChanges), the same
//           report from a node allowed none of it, and the default cap refusing it.
// Each report repeats the previous one with one phase changed, as an agent's reports do.
// Prints medians and 90th percentiles.
//
//   taskset -c 0 build/bin/hub_bench [--entries N] [--runs R] [--before-runs R]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/flags.h"
#include "common/log.h"
#include "controller/server/hub.h"
#include "controller/server/report_filter.h"
#include "controller/server/wire.h"
#include "api/phase.h"
#include "proto/convert.h"

namespace {

using Clock = std::chrono::steady_clock;
using kmodd::server::ReportedModule;

struct NullStream : kmodd::server::AgentStream {
  void Push(std::shared_ptr<const kmodd::v1::NodeDesired>) override {}
  void Close(const absl::Status&) override {}
};

kmodd::v1::NodeReport MakeReport(int entries, int changed) {
  kmodd::v1::NodeReport r;
  for (int i = 0; i < entries; ++i) {
    auto* m = r.add_modules();
    m->set_namespace_(absl::StrCat("ns-", i % 7));
    m->set_name(absl::StrCat("mod-", 1000000 + i));
    m->set_phase(i == changed ? kmodd::v1::LOADING : kmodd::v1::LOADED);
    m->set_message("loaded");
    m->set_image_digest("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    m->set_version("v1");
  }
  return r;
}

// Before: Hub::Report's module handling as it was (git show 48b72ae:controller/server/hub.cc),
// all of it under the hub's lock.
void ReportBefore(std::vector<ReportedModule>& previous, const kmodd::v1::NodeReport& report,
                  kmodd::Logger& log) {
  std::vector<ReportedModule> modules;
  modules.reserve(static_cast<size_t>(report.modules().size()));
  for (const auto& m : report.modules()) {
    modules.push_back(ReportedModule{absl::StrCat(m.namespace_(), "/", m.name()),
                                     kmodd::proto::FromProto(m.phase()), m.message(),
                                     m.image_digest(), m.version(), m.since_unix_ms(),
                                     m.image(), m.desired_version()});
  }
  std::sort(modules.begin(), modules.end(),
            [](const ReportedModule& a, const ReportedModule& b) { return a.key < b.key; });
  for (const ReportedModule& m : modules) {
    auto before = std::find_if(previous.begin(), previous.end(),
                               [&](const ReportedModule& o) { return o.key == m.key; });
    if (before == previous.end() || before->phase != m.phase) {
      log.Debug("module phase",
                {{"node", "n"}, {"module", m.key}, {"phase", kmodd::api::PhaseName(m.phase)}});
    }
  }
  for (const ReportedModule& old : previous) {
    if (std::none_of(modules.begin(), modules.end(),
                     [&](const ReportedModule& m) { return m.key == old.key; })) {
      log.Debug("module phase", {{"node", "n"}, {"module", old.key}, {"phase", "Gone"}});
    }
  }
  previous = std::move(modules);
}

struct Stats {
  double median_ms;
  double p90_ms;
  size_t runs;
};

Stats Summarise(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[std::min(ms.size() - 1, ms.size() * 9 / 10)], ms.size()};
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

void Row(const char* name, const Stats& s) {
  std::printf("%-66s %11.4f %11.4f %5zu\n", name, s.median_ms, s.p90_ms, s.runs);
}

}  // namespace

int main(int argc, char** argv) {
  int entries = 100000;
  int runs = 11;
  int before_runs = 3;
  kmodd::flags::FlagSet flags(
      "hub_bench", "usage: hub_bench [--entries N] [--runs R] [--before-runs R]\n");
  flags.Int("--entries", "N", "module entries in one report (default 100000)", &entries, {1});
  flags.Int("--runs", "R", "runs of each measure (default 11)", &runs, {1});
  flags.Int("--before-runs", "R", "runs of the O(n^2) reference (default 3)", &before_runs, {0});
  if (std::optional<int> exit =
          flags.ParseOrExit(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr)) {
    return *exit;
  }
  std::FILE* devnull = std::fopen("/dev/null", "w");
  kmodd::Logger log(devnull);  // info: the per-module debug lines are not written
  std::vector<kmodd::v1::NodeReport> reports;
  reports.reserve(2);
  for (int r = 0; r < 2; ++r) {
    reports.push_back(MakeReport(entries, r));  // alternating: one phase changes each time
  }

  // Before.
  std::vector<double> before;
  {
    std::vector<ReportedModule> previous;
    ReportBefore(previous, reports[0], log);
    for (int r = 0; r < before_runs; ++r) {
      const auto t0 = Clock::now();
      ReportBefore(previous, reports[(r + 1) % 2], log);
      before.push_back(Ms(Clock::now() - t0));
    }
  }

  // After: the real Hub, a node allowed every entry.
  kmodd::server::HubOptions options{"bench", std::chrono::minutes(10)};
  options.limits.max_modules = static_cast<size_t>(entries);
  kmodd::RealClock clock;
  kmodd::server::Hub hub(options, clock, log);
  kmodd::source::SourceUpdate source;
  source.errors_hold_all = false;
  for (const auto& m : reports[0].modules()) {
    source.finalized.insert(absl::StrCat(m.namespace_(), "/", m.name()));
  }
  hub.ApplySource(source);
  NullStream allowed;
  NullStream stranger;
  kmodd::v1::NodeInfo info;
  info.set_name("node-1");
  if (!hub.Hello(&allowed, info).ok() || !hub.Report(&allowed, reports[0]).ok()) {
    std::fprintf(stderr, "the hub refused the allowed node\n");
    return 1;
  }
  std::vector<double> after;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = Clock::now();
    const absl::Status st = hub.Report(&allowed, reports[(r + 1) % 2]);
    after.push_back(Ms(Clock::now() - t0));
    if (!st.ok() || hub.Node("node-1")->modules.size() != static_cast<size_t>(entries)) {
      std::fprintf(stderr, "report not taken whole: %s\n", st.ToString().c_str());
      return 1;
    }
  }

  // After, the part under the lock, on the same lists.
  std::vector<double> locked;
  {
    auto checked = kmodd::server::ReportedFromProto(reports[0].modules(), options.limits);
    std::vector<ReportedModule> previous = std::move(checked->modules);
    const std::set<std::string> sent;
    for (int r = 0; r < runs; ++r) {
      auto next = kmodd::server::ReportedFromProto(reports[(r + 1) % 2].modules(), options.limits);
      const auto t0 = Clock::now();
      kmodd::server::FilteredReport f = kmodd::server::FilterReport(
          std::move(next->modules), {&sent, &previous, &source.finalized, nullptr});
      size_t changes = kmodd::server::PhaseChanges(previous, f.accepted).size();
      // As in Hub::Report: the list replaced is freed after the lock is released.
      std::vector<ReportedModule> replaced = std::exchange(previous, std::move(f.accepted));
      locked.push_back(Ms(Clock::now() - t0));
      if (changes != 2) {
        std::fprintf(stderr, "expected 2 phase changes, got %zu\n", changes);
        return 1;
      }
    }
  }

  // After: a node allowed none of it (every entry ignored), and the default cap.
  kmodd::v1::NodeInfo other;
  other.set_name("node-2");
  (void)hub.Hello(&stranger, other);
  kmodd::v1::NodeReport foreign = reports[0];
  for (auto& m : *foreign.mutable_modules()) {
    m.set_namespace_("foreign");
  }
  std::vector<double> ignored;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = Clock::now();
    (void)hub.Report(&stranger, foreign);
    ignored.push_back(Ms(Clock::now() - t0));
  }
  kmodd::server::Hub capped({"bench", std::chrono::minutes(10)}, clock, log);
  capped.ApplySource(source);
  NullStream flooder;
  (void)capped.Hello(&flooder, info);
  std::vector<double> refused;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = Clock::now();
    const absl::Status st = capped.Report(&flooder, reports[r % 2]);
    refused.push_back(Ms(Clock::now() - t0));
    if (entries > 4096 && st.code() != absl::StatusCode::kResourceExhausted) {
      std::fprintf(stderr, "not refused: %s\n", st.ToString().c_str());
      return 1;
    }
  }

  const Stats b = Summarise(before);
  const Stats a = Summarise(after);
  const Stats l = Summarise(locked);
  std::printf("hub bench: one report of %d module entries (%zu bytes), one phase changed\n",
              entries, reports[0].ByteSizeLong());
  std::printf("%-66s %11s %11s %5s\n", "case", "median ms", "p90 ms", "runs");
  Row("before: Hub::Report's module handling (all under the lock)", b);
  Row("after: Hub::Report, every entry accepted (cap raised)", a);
  Row("after: of which under the lock (filter + merge)", l);
  Row("after: Hub::Report, every entry ignored (cap raised)", Summarise(ignored));
  Row("after: Hub::Report at the default cap (4096; refused when over)", Summarise(refused));
  std::printf("ratio before/after: %.1fx total, %.1fx under the lock\n", b.median_ms / a.median_ms,
              b.median_ms / l.median_ms);
  std::fclose(devnull);
  return 0;
}

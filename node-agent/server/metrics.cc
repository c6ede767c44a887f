#include "node-agent/server/metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kmodd::agent {

namespace {

std::string Number(double v) { return absl::StrFormat("%g", v); }

}  // namespace

std::string RenderMetrics(const MetricsSnapshot& s) {
  std::string out;
  absl::StrAppend(&out,
                  "# HELP kmodd_agent_controller_connected Whether the Sync stream to the "
                  "controller is up.\n"
                  "# TYPE kmodd_agent_controller_connected gauge\n"
                  "kmodd_agent_controller_connected ",
                  s.controller_connected ? 1 : 0, "\n");
  absl::StrAppend(&out,
                  "# HELP kmodd_agent_modules Modules by phase.\n"
                  "# TYPE kmodd_agent_modules gauge\n");
  for (api::Phase phase : api::kAgentPhases) {
    auto it = s.modules_by_phase.find(phase);
    absl::StrAppend(&out, "kmodd_agent_modules{phase=\"", api::PhaseName(phase), "\"} ",
                    it == s.modules_by_phase.end() ? 0 : it->second, "\n");
  }
  absl::StrAppend(&out,
                  "# HELP kmodd_agent_reconciles_total Reconcile passes.\n"
                  "# TYPE kmodd_agent_reconciles_total counter\n"
                  "kmodd_agent_reconciles_total ",
                  s.reconciles_total, "\n");
  absl::StrAppend(&out,
                  "# HELP kmodd_agent_actions_total Load and unload actions by result.\n"
                  "# TYPE kmodd_agent_actions_total counter\n");
  for (const auto& [key, n] : s.actions) {
    absl::StrAppend(&out, "kmodd_agent_actions_total{kind=\"", key.first, "\",result=\"",
                    key.second, "\"} ", n, "\n");
  }
  absl::StrAppend(&out,
                  "# HELP kmodd_agent_load_duration_seconds Time to load one Module "
                  "(swap included).\n"
                  "# TYPE kmodd_agent_load_duration_seconds histogram\n");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < s.load_bounds.size(); ++i) {
    cumulative += i < s.load_counts.size() ? s.load_counts[i] : 0;
    absl::StrAppend(&out, "kmodd_agent_load_duration_seconds_bucket{le=\"",
                    Number(s.load_bounds[i]), "\"} ", cumulative, "\n");
  }
  absl::StrAppend(&out, "kmodd_agent_load_duration_seconds_bucket{le=\"+Inf\"} ", s.load_count,
                  "\n", "kmodd_agent_load_duration_seconds_sum ", Number(s.load_sum), "\n",
                  "kmodd_agent_load_duration_seconds_count ", s.load_count, "\n");
  return out;
}

Metrics::Metrics() {
  s_.load_bounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  s_.load_counts.assign(s_.load_bounds.size(), 0);
}

void Metrics::RecordReconcile() {
  std::lock_guard<std::mutex> lock(mu_);
  ++s_.reconciles_total;
}

void Metrics::RecordAction(const std::string& kind, bool ok, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++s_.actions[{kind, ok ? "ok" : "error"}];
  if (kind != "load") {
    return;
  }
  ++s_.load_count;
  s_.load_sum += seconds;
  for (size_t i = 0; i < s_.load_bounds.size(); ++i) {
    if (seconds <= s_.load_bounds[i]) {
      ++s_.load_counts[i];
      break;
    }
  }
}

MetricsSnapshot Metrics::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return s_;
}

}  // namespace kmodd::agent

#include "controller/server/metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace kmodd::server {

namespace {

std::string Escaped(const std::string& v) {
  return absl::StrReplaceAll(v, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}});
}

std::string ModuleLabels(const ModuleState& m) {
  return absl::StrCat("namespace=\"", Escaped(m.namespace_), "\",name=\"", Escaped(m.name), "\"");
}

void Header(std::string& out, const char* name, const char* type, const char* help) {
  absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

}  // namespace

const std::vector<double>& AckBounds() {
  static const std::vector<double> kBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                              0.5,   1,    2.5,   5,    10};
  return kBounds;
}

std::string RenderControllerMetrics(const ControllerStatus& status, const HubCounters& hub,
                                    uint64_t reconcile_errors) {
  std::string out;
  int64_t connected = 0;
  for (const NodeRecord& n : status.nodes) {
    connected += n.connected ? 1 : 0;
  }
  Header(out, "kmodd_controller_agents_connected", "gauge", "Agents with a Sync stream open.");
  absl::StrAppend(&out, "kmodd_controller_agents_connected ", connected, "\n");
  Header(out, "kmodd_controller_nodes", "gauge", "Nodes the controller knows.");
  absl::StrAppend(&out, "kmodd_controller_nodes ", status.nodes.size(), "\n");

  Header(out, "kmodd_controller_module_nodes", "gauge",
         "Nodes per phase of each Module, as its status rows say.");
  static constexpr const char* kRowPhases[] = {"Pending", "Pulling", "Loading", "Loaded",
                                               "Unloading", "Failed", "Skipped", "Unknown"};
  for (const ModuleState& m : status.modules) {
    for (const char* phase : kRowPhases) {
      int64_t n = 0;
      for (const NodeModuleStatus& row : m.nodes) {
        n += std::string(RowPhase(row)) == phase ? 1 : 0;
      }
      absl::StrAppend(&out, "kmodd_controller_module_nodes{", ModuleLabels(m), ",phase=\"", phase,
                      "\"} ", n, "\n");
    }
  }

  Header(out, "kmodd_controller_rollout_phase", "gauge",
         "1 for the current phase of the rollout of each Module with a ModulePolicy.");
  static constexpr const char* kPhases[] = {"Progressing", "Paused",   "WaitingAfterCanary",
                                            "Halted",      "Complete", "Undone",
                                            "NoModule",    "Settling"};
  for (const ModuleState& m : status.modules) {
    if (!m.rollout) {
      continue;
    }
    for (const char* phase : kPhases) {
      absl::StrAppend(&out, "kmodd_controller_rollout_phase{", ModuleLabels(m), ",phase=\"", phase,
                      "\"} ", m.rollout->phase == phase ? 1 : 0, "\n");
    }
  }
  Header(out, "kmodd_controller_rollout_nodes", "gauge",
         "Nodes per state of the rollout of each Module with a ModulePolicy.");
  for (const ModuleState& m : status.modules) {
    if (!m.rollout) {
      continue;
    }
    const RolloutState& r = *m.rollout;
    const std::pair<const char*, int64_t> states[] = {
        {"updated", r.updated}, {"updating", r.updating}, {"ready", r.ready},
        {"failed", r.failed},   {"waiting", r.waiting},   {"rolled_back", r.rolled_back}};
    for (const auto& [state, n] : states) {
      absl::StrAppend(&out, "kmodd_controller_rollout_nodes{", ModuleLabels(m), ",state=\"", state,
                      "\"} ", n, "\n");
    }
  }

  Header(out, "kmodd_controller_reports_total", "counter", "Agent reports taken.");
  absl::StrAppend(&out, "kmodd_controller_reports_total ", hub.reports, "\n");
  Header(out, "kmodd_controller_reports_refused_total", "counter",
          "Agent reports refused (over the limits of one report).");
  absl::StrAppend(&out, "kmodd_controller_reports_refused_total ", hub.reports_refused, "\n");
  Header(out, "kmodd_controller_pushes_total", "counter", "Desired states sent to agents.");
  absl::StrAppend(&out, "kmodd_controller_pushes_total ", hub.pushes, "\n");
  Header(out, "kmodd_controller_push_ack_seconds", "histogram",
         "From a desired state sent to the agent's ACK of it.");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < hub.ack_bounds.size() && i < hub.ack_counts.size(); ++i) {
    cumulative += hub.ack_counts[i];
    absl::StrAppend(&out, "kmodd_controller_push_ack_seconds_bucket{le=\"", hub.ack_bounds[i],
                    "\"} ", cumulative, "\n");
  }
  absl::StrAppend(&out, "kmodd_controller_push_ack_seconds_bucket{le=\"+Inf\"} ", hub.ack_count, "\n");
  absl::StrAppend(&out, "kmodd_controller_push_ack_seconds_sum ", hub.ack_sum, "\n");
  absl::StrAppend(&out, "kmodd_controller_push_ack_seconds_count ", hub.ack_count, "\n");
  Header(out, "kmodd_controller_reconcile_errors_total", "counter",
         "Kubernetes writer duties (labels, status, finalizer, DaemonSets) that failed.");
  absl::StrAppend(&out, "kmodd_controller_reconcile_errors_total ", reconcile_errors, "\n");
  return out;
}

}  // namespace kmodd::server

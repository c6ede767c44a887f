#pragma once

// The controller's Prometheus metrics (issue 15): what the hub counts (reports, ACK
// latency) and what its status says (agents, nodes per phase per Module, rollouts), as
// exposition text (format 0.0.4). Pure: the caller passes the snapshots.
//
//   kmodd_controller_agents_connected                      gauge
//   kmodd_controller_nodes                                 gauge: nodes known
//   kmodd_controller_module_nodes{namespace,name,phase}    gauge: rows per phase
//   kmodd_controller_rollout_phase{namespace,name,phase}   gauge: 1 for the current phase
//   kmodd_controller_rollout_nodes{namespace,name,state}   gauge: updated, updating, ready,
//                                                          failed, waiting, rolled_back
//   kmodd_controller_reports_total                         counter
//   kmodd_controller_reports_refused_total                 counter: over the limits
//   kmodd_controller_pushes_total                          counter: desired states sent
//   kmodd_controller_push_ack_seconds                      histogram: push to the agent's ACK
//   kmodd_controller_reconcile_errors_total                counter: Kubernetes writer duties
//                                                          that failed (0 in standalone)

#include <cstdint>
#include <string>
#include <vector>

#include "controller/server/status.h"

namespace kmodd::server {

struct HubCounters {
  uint64_t reports = 0;
  uint64_t reports_refused = 0;
  uint64_t pushes = 0;
  std::vector<double> ack_bounds;    // histogram upper bounds, seconds
  std::vector<uint64_t> ack_counts;  // per bucket, not cumulative (one per bound)
  uint64_t ack_count = 0;
  double ack_sum = 0;
};

// Upper bounds of kmodd_controller_push_ack_seconds.
const std::vector<double>& AckBounds();

std::string RenderControllerMetrics(const ControllerStatus& status, const HubCounters& hub,
                                    uint64_t reconcile_errors);

}  // namespace kmodd::server

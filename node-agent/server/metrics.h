#pragma once

// The agent's Prometheus metrics: counters the reconciler records (thread-safe), and the
// pure text rendering the metrics server serves.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "api/phase.h"

namespace kmodd::agent {

struct MetricsSnapshot {
  bool controller_connected = false;
  std::map<api::Phase, int> modules_by_phase;
  uint64_t reconciles_total = 0;
  std::map<std::pair<std::string, std::string>, uint64_t> actions;  // (kind, result) -> n
  std::vector<double> load_bounds;    // histogram upper bounds, seconds
  std::vector<uint64_t> load_counts;  // per bucket, not cumulative (one per bound)
  uint64_t load_count = 0;
  double load_sum = 0;
};

// Prometheus text exposition format 0.0.4. Every phase is listed, zeros included, so that
// a dashboard sees a Module leave a phase.
std::string RenderMetrics(const MetricsSnapshot& s);

class Metrics {
 public:
  Metrics();
  void RecordReconcile();
  // kind: load, unload; result: ok, error. Loads also feed the duration histogram.
  void RecordAction(const std::string& kind, bool ok, double seconds);
  // The counters; the caller fills in the gauges.
  MetricsSnapshot Snapshot() const;

 private:
  mutable std::mutex mu_;
  MetricsSnapshot s_;
};

}  // namespace kmodd::agent

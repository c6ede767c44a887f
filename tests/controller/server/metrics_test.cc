// The controller's metrics text (controller/server/metrics.h).

#include "controller/server/metrics.h"

#include <catch2/catch.hpp>

#include <string>

namespace kmodd::server {
namespace {

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

TEST_CASE("controller metrics: agents - nodes per phase - the rollout - the ACK histogram") {
  ControllerStatus s;
  s.nodes.resize(3);
  s.nodes[0].connected = true;
  s.nodes[1].connected = true;
  ModuleState m;
  m.namespace_ = "fleet";
  m.name = "drv";
  NodeModuleStatus loaded;
  loaded.node = "a";
  loaded.phase = api::Phase::kLoaded;
  NodeModuleStatus failed = loaded;
  failed.node = "b";
  failed.phase = api::Phase::kFailed;
  m.nodes = {loaded, failed};
  RolloutState r;
  r.phase = "Halted";
  r.updated = 5;
  r.failed = 3;
  r.waiting = 95;
  r.rolled_back = 3;
  m.rollout = r;
  s.modules.push_back(m);
  ModuleState plain;  // no policy: no rollout series
  plain.namespace_ = "fleet";
  plain.name = "quote\"d";
  s.modules.push_back(plain);
  HubCounters h;
  h.reports = 7;
  h.pushes = 4;
  h.ack_bounds = {0.01, 0.1};
  h.ack_counts = {2, 1};
  h.ack_count = 4;  // one over the last bound
  h.ack_sum = 1.5;

  const std::string text = RenderControllerMetrics(s, h, 9);
  CHECK(Has(text, "kmodd_controller_agents_connected 2"));
  CHECK(Has(text, "kmodd_controller_nodes 3"));
  CHECK(Has(text, R"(kmodd_controller_module_nodes{namespace="fleet",name="drv",phase="Loaded"} 1)"));
  CHECK(Has(text, R"(kmodd_controller_module_nodes{namespace="fleet",name="drv",phase="Failed"} 1)"));
  CHECK(Has(text, R"(kmodd_controller_module_nodes{namespace="fleet",name="drv",phase="Loading"} 0)"));
  CHECK(Has(text, R"(kmodd_controller_rollout_phase{namespace="fleet",name="drv",phase="Halted"} 1)"));
  CHECK(Has(text, R"(kmodd_controller_rollout_phase{namespace="fleet",name="drv",phase="Complete"} 0)"));
  CHECK(Has(text, R"(kmodd_controller_rollout_nodes{namespace="fleet",name="drv",state="rolled_back"} 3)"));
  CHECK(text.find(R"(name="quote\"d",phase="Loaded"} 0)") != std::string::npos);  // escaped
  CHECK(text.find(R"(kmodd_controller_rollout_phase{namespace="fleet",name="quote)") == std::string::npos);
  CHECK(Has(text, "kmodd_controller_reports_total 7"));
  CHECK(Has(text, "kmodd_controller_pushes_total 4"));
  CHECK(Has(text, R"(kmodd_controller_push_ack_seconds_bucket{le="0.01"} 2)"));
  CHECK(Has(text, R"(kmodd_controller_push_ack_seconds_bucket{le="0.1"} 3)"));  // cumulative
  CHECK(Has(text, R"(kmodd_controller_push_ack_seconds_bucket{le="+Inf"} 4)"));
  CHECK(Has(text, "kmodd_controller_push_ack_seconds_sum 1.5"));
  CHECK(Has(text, "kmodd_controller_reconcile_errors_total 9"));
  CHECK(Has(text, "# TYPE kmodd_controller_push_ack_seconds histogram"));
}

}  // namespace
}  // namespace kmodd::server

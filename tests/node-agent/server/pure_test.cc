#include <catch2/catch.hpp>

#include <cerrno>

#include "node-agent/kernel/errors.h"
#include "node-agent/server/backoff.h"
#include "node-agent/server/metrics.h"
#include "common/http/metrics_routes.h"
#include "node-agent/server/module_status.h"

using kmodd::agent::BackoffDelay;
using kmodd::agent::BackoffPolicy;
using kmodd::agent::DerivedPhase;
using kmodd::agent::DerivePhase;
using kmodd::agent::ErrorClass;
using kmodd::agent::ModuleFacts;
using kmodd::api::Phase;
using std::chrono::milliseconds;

TEST_CASE("backoff doubles from its start, is capped, and jitters within the upper half", "[server]") {
  const BackoffPolicy p{milliseconds(100), milliseconds(30000)};
  CHECK(BackoffDelay(p, 0, 0.0) == milliseconds(50));
  CHECK(BackoffDelay(p, 0, 0.999) == milliseconds(99));
  CHECK(BackoffDelay(p, 3, 0.0) == milliseconds(400));
  CHECK(BackoffDelay(p, 20, 0.0) == milliseconds(15000));
  CHECK(BackoffDelay(p, 1000, 0.999) <= milliseconds(30000));
  kmodd::agent::Backoff b(p);
  CHECK(b.Next(0) == milliseconds(50));
  CHECK(b.Next(0) == milliseconds(100));
  b.Reset();
  CHECK(b.Next(0) == milliseconds(50));
}

TEST_CASE("a Module's phase follows what the reconciler knows, in order", "[server]") {
  const absl::Status busy = kmodd::kernel::KernelError(kmodd::kernel::KernelOp::kInsert, EBUSY, "m");
  const absl::Status vermagic = absl::InvalidArgumentError("vermagic mismatch");
  const absl::Status perm = kmodd::kernel::KernelError(kmodd::kernel::KernelOp::kInsert, EPERM, "m");
  struct Row {
    const char* what;
    ModuleFacts facts;
    Phase phase;
    ErrorClass error_class;
  };
  auto facts = [](auto f) {
    ModuleFacts m;
    m.desired = true;
    f(m);
    return m;
  };
  const Row rows[] = {
      {"desired, nothing yet", facts([](ModuleFacts&) {}), Phase::kPending, ErrorClass::kNone},
      {"image being pulled", facts([](ModuleFacts& m) { m.pulling = true; }), Phase::kPulling,
       ErrorClass::kNone},
      {"being loaded", facts([](ModuleFacts& m) { m.acting = ModuleFacts::Acting::kLoad; }),
       Phase::kLoading, ErrorClass::kNone},
      {"in the kernel as desired", facts([](ModuleFacts& m) { m.converged = true; }),
       Phase::kLoaded, ErrorClass::kNone},
      {"converged wins over an old error",
       facts([&](ModuleFacts& m) { m.converged = true; m.last_error = busy; }),
       Phase::kLoaded, ErrorClass::kNone},
      {"busy: retried", facts([&](ModuleFacts& m) { m.last_error = busy; }), Phase::kFailed,
       ErrorClass::kRetry},
      {"not permitted: terminal", facts([&](ModuleFacts& m) { m.last_error = perm; }),
       Phase::kFailed, ErrorClass::kTerminal},
      {"bad image: terminal", facts([&](ModuleFacts& m) { m.problem = vermagic; }),
       Phase::kFailed, ErrorClass::kTerminal},
      {"no longer desired", ModuleFacts{}, Phase::kUnloading, ErrorClass::kNone},
      {"being unloaded", [] { ModuleFacts m; m.acting = ModuleFacts::Acting::kUnload; return m; }(),
       Phase::kUnloading, ErrorClass::kNone},
  };
  for (const auto& r : rows) {
    INFO(r.what);
    const DerivedPhase d = DerivePhase(r.facts);
    CHECK(d.phase == r.phase);
    CHECK(d.error_class == r.error_class);
  }
}

TEST_CASE("metrics text lists every phase and the action counters", "[server]") {
  kmodd::agent::Metrics m;
  m.RecordReconcile();
  m.RecordAction("load", true, 0.02);
  m.RecordAction("load", false, 0.2);
  m.RecordAction("unload", true, 0.001);
  kmodd::agent::MetricsSnapshot s = m.Snapshot();
  s.controller_connected = true;
  s.modules_by_phase[kmodd::api::Phase::kLoaded] = 2;
  const std::string text = kmodd::agent::RenderMetrics(s);
  CHECK(text.find("kmodd_agent_controller_connected 1\n") != std::string::npos);
  CHECK(text.find("kmodd_agent_modules{phase=\"Loaded\"} 2\n") != std::string::npos);
  CHECK(text.find("kmodd_agent_modules{phase=\"Failed\"} 0\n") != std::string::npos);
  CHECK(text.find("kmodd_agent_reconciles_total 1\n") != std::string::npos);
  CHECK(text.find("kmodd_agent_actions_total{kind=\"load\",result=\"error\"} 1\n") != std::string::npos);
  CHECK(text.find("kmodd_agent_actions_total{kind=\"unload\",result=\"ok\"} 1\n") != std::string::npos);
  CHECK(text.find("kmodd_agent_load_duration_seconds_bucket{le=\"0.025\"} 1\n") != std::string::npos);
  CHECK(text.find("kmodd_agent_load_duration_seconds_bucket{le=\"0.25\"} 2\n") != std::string::npos);
  CHECK(text.find("kmodd_agent_load_duration_seconds_count 2\n") != std::string::npos);
}

TEST_CASE("the metrics server routes /metrics and /healthz, 503 when wedged", "[server]") {
  bool healthy = true;
  const kmodd::http::Router routes = kmodd::http::MetricsRoutes(
      {[] { return std::string("x 1\n"); }, [&] { return healthy; }});
  auto route = [&](const std::string& method, const std::string& target) {
    return routes.Route({method, target, "", ""});
  };
  CHECK(route("GET", "/metrics").body == "x 1\n");
  CHECK(route("GET", "/healthz").status == 200);
  CHECK(route("HEAD", "/metrics").status == 200);
  CHECK(route("HEAD", "/metrics").body.empty());
  healthy = false;
  CHECK(route("GET", "/healthz").status == 503);
  CHECK(route("GET", "/nope").status == 404);
  CHECK(route("POST", "/metrics").status == 405);
}

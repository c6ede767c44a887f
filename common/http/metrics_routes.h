#pragma once

// Prometheus and liveness endpoints (the agent's and the controller's), as routes on the
// server (server.h) in plain HTTP: GET /metrics, GET /healthz (HEAD too). The handlers
// only read in-memory state, so they run on the server's I/O thread.

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/http/router.h"
#include "common/http/server.h"
#include "common/log.h"

namespace kmodd::http {

struct HttpHandlers {
  std::function<std::string()> metrics;  // the exposition text
  std::function<bool()> healthy;         // false: /healthz answers 503
};

// Pure routing, tested without sockets through Router::Route.
Router MetricsRoutes(HttpHandlers handlers);

// The server for `listen` (ADDR:PORT; port 0 picks a free one): plain HTTP, and limits
// sized for a scraper and a probe rather than for the webhook's 3 MiB reviews.
ServerOptions MetricsServerOptions(const std::string& listen);

}  // namespace kmodd::http

#pragma once

// The agent's Prometheus and liveness endpoints, as routes on common/http's server
// (server.h) in plain HTTP on a local address (default 127.0.0.1:9464): GET /metrics,
// GET /healthz (HEAD too). The handlers only read in-memory state, so they run on the
// server's I/O thread.

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/http/router.h"
#include "common/http/server.h"
#include "common/log.h"

namespace kmodd::agent {

struct HttpHandlers {
  std::function<std::string()> metrics;  // the exposition text
  std::function<bool()> healthy;         // false: /healthz answers 503
};

// Pure routing, tested without sockets through Router::Route.
http::Router MetricsRoutes(HttpHandlers handlers);

// The server for `listen` (ADDR:PORT; port 0 picks a free one): plain HTTP, and limits
// sized for a scraper and a probe rather than for the webhook's 3 MiB reviews.
http::ServerOptions MetricsServerOptions(const std::string& listen);

}  // namespace kmodd::agent

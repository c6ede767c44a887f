#include "common/http/metrics_routes.h"

#include <utility>

namespace kmodd::http {

Router MetricsRoutes(HttpHandlers handlers) {
  auto h = std::make_shared<const HttpHandlers>(std::move(handlers));
  Router routes;
  routes.Add("GET", "/metrics", RunOn::kIoThread, [h](const ServerRequest&) {
    return ServerReply{200, "text/plain; version=0.0.4; charset=utf-8",
                             h->metrics ? h->metrics() : ""};
  });
  routes.Add("GET", "/healthz", RunOn::kIoThread, [h](const ServerRequest&) {
    const bool ok = !h->healthy || h->healthy();
    return ok ? ServerReply{200, "text/plain", "ok\n"}
              : ServerReply{503, "text/plain", "reconcile loop wedged\n"};
  });
  return routes;
}

ServerOptions MetricsServerOptions(const std::string& listen) {
  ServerOptions o;
  o.name = "metrics";
  o.listen = listen;
  o.default_host = "127.0.0.1";
  o.body_limit = 64 << 10;  // GET and HEAD only: a body is never needed
  o.large_body = o.body_limit;
  o.body_memory = o.body_limit;
  o.max_connections = 64;
  o.max_connections_per_peer = 32;
  o.workers = 0;  // every route runs on the I/O thread
  return o;
}

}  // namespace kmodd::http

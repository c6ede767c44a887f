#pragma once

// A tiny HTTP/1.1 server on Boost.Beast for Prometheus and liveness probes, on a local
// address (default 127.0.0.1:9464): GET /metrics, GET /healthz. One request per
// connection; runs on the caller's io_context and never blocks it (the handlers only read
// in-memory state).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "absl/status/statusor.h"

namespace kmodd::agent {

struct HttpHandlers {
  std::function<std::string()> metrics;  // the exposition text
  std::function<bool()> healthy;         // false: /healthz answers 503
};

struct HttpReply {
  int status = 200;
  std::string content_type;
  std::string body;
};

// Pure routing, tested without sockets.
HttpReply Route(const std::string& method, const std::string& target, const HttpHandlers& h);

class MetricsServer {
 public:
  // `listen` is ADDR:PORT; port 0 picks a free one (see port()).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      boost::asio::io_context& io, const std::string& listen, HttpHandlers handlers);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  uint16_t port() const;
  void Stop();

  struct Impl;

 private:
  explicit MetricsServer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace kmodd::agent

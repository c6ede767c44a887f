#include "node-agent/server/metrics_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kmodd::agent {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

HttpReply Route(const std::string& method, const std::string& target, const HttpHandlers& h) {
  const std::string path = target.substr(0, target.find('?'));
  if (method != "GET" && method != "HEAD") {
    return {405, "text/plain", "method not allowed\n"};
  }
  if (path == "/metrics") {
    return {200, "text/plain; version=0.0.4; charset=utf-8", h.metrics ? h.metrics() : ""};
  }
  if (path == "/healthz") {
    const bool ok = !h.healthy || h.healthy();
    return ok ? HttpReply{200, "text/plain", "ok\n"}
              : HttpReply{503, "text/plain", "reconcile loop wedged\n"};
  }
  return {404, "text/plain", "not found\n"};
}

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const HttpHandlers& handlers)
      : stream_(std::move(socket)), handlers_(handlers) {}

  void Run() {
    stream_.expires_after(std::chrono::seconds(10));
    http::async_read(stream_, buffer_, request_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

 private:
  void OnRead(beast::error_code ec) {
    if (ec) {
      return;
    }
    const HttpReply r = Route(std::string(request_.method_string()),
                              std::string(request_.target()), handlers_);
    response_.version(request_.version());
    response_.result(static_cast<unsigned>(r.status));
    response_.set(http::field::content_type, r.content_type);
    response_.body() = request_.method() == http::verb::head ? "" : r.body;
    response_.keep_alive(false);
    response_.prepare_payload();
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code, size_t) {
                        beast::error_code ignored;
                        self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
                      });
  }

  beast::tcp_stream stream_;
  HttpHandlers handlers_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
};

}  // namespace

struct MetricsServer::Impl : std::enable_shared_from_this<MetricsServer::Impl> {
  Impl(asio::io_context& io, HttpHandlers h) : acceptor(io), handlers(std::move(h)) {}

  void Accept() {
    acceptor.async_accept([self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == asio::error::operation_aborted || !self->acceptor.is_open()) {
          return;
        }
      } else {
        std::make_shared<Session>(std::move(socket), self->handlers)->Run();
      }
      self->Accept();
    });
  }

  tcp::acceptor acceptor;
  HttpHandlers handlers;
};

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(asio::io_context& io,
                                                                    const std::string& listen,
                                                                    HttpHandlers handlers) {
  const size_t colon = listen.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port) ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address \"", listen, "\": expected ADDR:PORT"));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  beast::error_code ec;
  const auto addr = asio::ip::make_address(host.empty() ? "127.0.0.1" : host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address \"", listen, "\": ", ec.message()));
  }
  auto impl = std::make_shared<Impl>(io, std::move(handlers));
  const tcp::endpoint ep(addr, static_cast<uint16_t>(port));
  impl->acceptor.open(ep.protocol(), ec);
  if (!ec) {
    impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  }
  if (!ec) {
    impl->acceptor.bind(ep, ec);
  }
  if (!ec) {
    impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    return absl::UnavailableError(absl::StrCat("metrics server on ", listen, ": ", ec.message()));
  }
  impl->Accept();
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

MetricsServer::~MetricsServer() { Stop(); }

uint16_t MetricsServer::port() const {
  beast::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

void MetricsServer::Stop() {
  beast::error_code ec;
  impl_->acceptor.close(ec);
}

}  // namespace kmodd::agent

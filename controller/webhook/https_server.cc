#include "controller/webhook/https_server.h"

#include <openssl/ssl.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "controller/webhook/webhook.h"

namespace kmodd::webhook {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

HttpsReply RouteWebhook(const std::string& method, const std::string& target,
                        const std::string& body) {
  const std::string path = target.substr(0, target.find('?'));
  if (path != "/validate-module") {
    return {404, "text/plain", "not found\n"};
  }
  if (method != "POST") {
    return {405, "text/plain", "method not allowed: POST an AdmissionReview\n"};
  }
  absl::StatusOr<std::string> out = ReviewModuleJson(body);
  if (!out.ok()) {
    return {400, "text/plain", absl::StrCat(out.status().message(), "\n")};
  }
  return {200, "application/json", *std::move(out)};
}

namespace {

absl::StatusOr<std::shared_ptr<ssl::context>> MakeContext(const std::string& cert_pem,
                                                          const std::string& key_pem) {
  try {
    auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
    SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_compression |
                     ssl::context::single_dh_use);
    ctx->use_certificate_chain(asio::buffer(cert_pem));
    ctx->use_private_key(asio::buffer(key_pem), ssl::context::pem);
    if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
      return absl::InvalidArgumentError("the webhook key does not match its certificate");
    }
    return ctx;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load the webhook certificate and key: ", e.what()));
  }
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, ssl::context& ctx, std::shared_ptr<ssl::context> keep,
          const HttpsHandler& handler, const HttpsOptions& options)
      : stream_(std::move(socket), ctx), keep_(std::move(keep)), handler_(handler),
        options_(options) {}

  void Run() {
    Arm();
    stream_.async_handshake(ssl::stream_base::server,
                            [self = shared_from_this()](beast::error_code ec) {
                              if (!ec) {
                                self->Read();
                              }
                            });
  }

 private:
  void Arm() {
    beast::get_lowest_layer(stream_).expires_after(std::chrono::seconds(options_.timeout_seconds));
  }

  void Read() {
    parser_.emplace();
    parser_->body_limit(options_.body_limit);
    parser_->header_limit(16 * 1024);
    Arm();
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      Reply({413, "text/plain", "request body over the limit\n"}, false);
      return;
    }
    if (ec) {
      Close();
      return;
    }
    const auto& req = parser_->get();
    Reply(handler_(std::string(req.method_string()), std::string(req.target()), req.body()),
          req.keep_alive());
  }

  void Reply(const HttpsReply& r, bool keep_alive) {
    response_ = {};
    response_.version(11);
    response_.result(static_cast<unsigned>(r.status));
    response_.set(http::field::content_type, r.content_type);
    response_.body() = r.body;
    response_.keep_alive(keep_alive);
    response_.prepare_payload();
    Arm();
    http::async_write(stream_, response_,
                      [self = shared_from_this(), keep_alive](beast::error_code ec, size_t) {
                        if (!ec && keep_alive) {
                          self->Read();
                        } else {
                          self->Close();
                        }
                      });
  }

  void Close() {
    Arm();
    stream_.async_shutdown([self = shared_from_this()](beast::error_code) {});
  }

  beast::ssl_stream<beast::tcp_stream> stream_;
  std::shared_ptr<ssl::context> keep_;  // the context this connection was accepted with
  const HttpsHandler& handler_;
  const HttpsOptions& options_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
};

}  // namespace

struct HttpsServer::Impl : std::enable_shared_from_this<HttpsServer::Impl> {
  Impl(HttpsOptions o, HttpsHandler h, std::shared_ptr<ssl::context> ctx, Logger& l)
      : acceptor(io), options(std::move(o)), handler(std::move(h)), context(std::move(ctx)),
        log(l) {}

  std::shared_ptr<ssl::context> Context() {
    std::lock_guard lock(mu);
    return context;
  }

  void Accept() {
    acceptor.async_accept(asio::make_strand(io), [self = shared_from_this()](
                                                     beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == asio::error::operation_aborted || !self->acceptor.is_open()) {
          return;
        }
      } else {
        std::shared_ptr<ssl::context> ctx = self->Context();
        std::make_shared<Session>(std::move(socket), *ctx, ctx, self->handler, self->options)
            ->Run();
      }
      self->Accept();
    });
  }

  asio::io_context io;
  tcp::acceptor acceptor;
  const HttpsOptions options;
  const HttpsHandler handler;
  std::mutex mu;
  std::shared_ptr<ssl::context> context;  // guarded by mu
  Logger& log;
  std::thread thread;
};

absl::StatusOr<std::unique_ptr<HttpsServer>> HttpsServer::Start(const HttpsOptions& options,
                                                                const std::string& cert_pem,
                                                                const std::string& key_pem,
                                                                HttpsHandler handler,
                                                                Logger& log) {
  const std::string& listen = options.listen;
  const size_t colon = listen.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port) ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("webhook address \"", listen, "\": expected ADDR:PORT"));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  beast::error_code ec;
  const auto addr = asio::ip::make_address(host.empty() ? "0.0.0.0" : host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("webhook address \"", listen, "\": ", ec.message()));
  }
  absl::StatusOr<std::shared_ptr<ssl::context>> ctx = MakeContext(cert_pem, key_pem);
  if (!ctx.ok()) {
    return ctx.status();
  }
  auto impl = std::make_shared<Impl>(options, std::move(handler), *std::move(ctx), log);
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
    return absl::UnavailableError(absl::StrCat("webhook server on ", listen, ": ", ec.message()));
  }
  impl->Accept();
  impl->thread = std::thread([raw = impl.get()] { raw->io.run(); });
  auto server = std::unique_ptr<HttpsServer>(new HttpsServer(std::move(impl)));
  log.Info("webhook server listening", {{"address", listen}, {"port", server->port()}});
  return server;
}

HttpsServer::~HttpsServer() { Stop(); }

absl::Status HttpsServer::SetCertificate(const std::string& cert_pem, const std::string& key_pem) {
  absl::StatusOr<std::shared_ptr<ssl::context>> ctx = MakeContext(cert_pem, key_pem);
  if (!ctx.ok()) {
    return ctx.status();
  }
  std::lock_guard lock(impl_->mu);
  impl_->context = *std::move(ctx);
  return absl::OkStatus();
}

uint16_t HttpsServer::port() const {
  beast::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

void HttpsServer::Stop() {
  if (!impl_->thread.joinable()) {
    return;
  }
  asio::post(impl_->io, [impl = impl_] {
    beast::error_code ec;
    impl->acceptor.close(ec);
  });
  impl_->io.stop();
  impl_->thread.join();
}

}  // namespace kmodd::webhook

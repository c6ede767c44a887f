#include "controller/webhook/https_server.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/error.hpp>
#include <chrono>
#include <exception>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "controller/webhook/https_session.h"
#include "controller/webhook/webhook.h"

namespace kmodd::webhook {

namespace asio = boost::asio;
namespace beast = boost::beast;
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

constexpr std::chrono::milliseconds kMinBackoff{10};
constexpr std::chrono::milliseconds kMaxBackoff{1000};
constexpr std::chrono::seconds kRefusalLogEvery{10};

// The client's address, as the connection caps count it: an IPv4 client of a dual-stack
// listener counts as its IPv4 address.
std::string PeerOf(const tcp::endpoint& remote) {
  asio::ip::address a = remote.address();
  if (a.is_v6() && a.to_v6().is_v4_mapped()) {
    a = asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  }
  return a.to_string();
}

}  // namespace

struct HttpsServer::Impl {
  Impl(std::shared_ptr<ServerShared> s, std::shared_ptr<ssl::context> ctx)
      : shared(std::move(s)), context(std::move(ctx)) {}

  std::shared_ptr<ssl::context> Context() {
    std::lock_guard lock(mu);
    return context;
  }

  void Accept() {
    acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
      OnAccept(ec, std::move(socket));
    });
  }

  void OnAccept(beast::error_code ec, tcp::socket socket) {
    ++shared->accepts;
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) {
      return;
    }
    if (ec) {
      BackOff(ec);
      return;
    }
    if (burst_errors > 0) {
      shared->log.Info("webhook accepts connections again",
                       {{"failed_accepts", static_cast<int64_t>(burst_errors)}});
      burst_errors = 0;
    }
    backoff = std::chrono::milliseconds(0);
    Admit(std::move(socket));
    Accept();
  }

  // EMFILE and ENFILE leave the connection in the backlog, so the listening socket stays
  // readable: an accept retried at once fails at once, for as long as the descriptors are
  // gone, on the thread that serves every connection.
  void BackOff(const beast::error_code& ec) {
    ++shared->accept_errors;
    backoff = std::clamp(backoff * 2, kMinBackoff, kMaxBackoff);
    if (burst_errors++ == 0) {
      shared->log.Warn("webhook cannot accept connections; retrying with backoff up to 1 s",
                       {{"error", ec.message()}});
    }
    backoff_timer.expires_after(backoff);
    backoff_timer.async_wait([this](beast::error_code e) {
      if (!e && acceptor.is_open()) {
        Accept();
      }
    });
  }

  void Admit(tcp::socket socket) {
    beast::error_code ec;
    const tcp::endpoint remote = socket.remote_endpoint(ec);
    if (ec) {
      return;  // gone already
    }
    std::string peer = PeerOf(remote);
    std::optional<ConnectionLimiter::Slot> slot = shared->limiter.TryAcquire(peer);
    if (!slot) {
      ++shared->refused;
      NoteRefusal(peer);
      socket.close(ec);
      return;
    }
    StartSession(std::move(socket), Context(), shared, std::move(*slot), std::move(peer));
  }

  // One line per kRefusalLogEvery at most: a flood of refused connections must not become
  // a flood of log lines.
  void NoteRefusal(const std::string& peer) {
    ++refused_unlogged;
    const auto now = std::chrono::steady_clock::now();
    if (logged_refusal && now - last_refusal_log < kRefusalLogEvery) {
      return;
    }
    shared->log.Warn("webhook connections refused at the connection cap",
                     {{"peer", peer},
                      {"refused", static_cast<int64_t>(refused_unlogged)},
                      {"connections", shared->limiter.connections()},
                      {"max_connections", shared->options.max_connections},
                      {"max_connections_per_peer", shared->options.max_connections_per_peer}});
    refused_unlogged = 0;
    logged_refusal = true;
    last_refusal_log = now;
  }

  void Run() {
    for (;;) {
      try {
        io.run();
        return;
      } catch (const std::exception& e) {  // a handler threw: log it, serve on
        shared->log.Error("webhook server error", {{"error", e.what()}});
      }
    }
  }

  // The io_context goes last: handlers still queued in it own sessions, and sessions own
  // what they need (ServerShared), so that order is all the shutdown needs.
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  asio::steady_timer backoff_timer{io};
  std::shared_ptr<ServerShared> shared;
  std::mutex mu;
  std::shared_ptr<ssl::context> context;  // guarded by mu
  // The I/O thread's own:
  std::chrono::milliseconds backoff{0};
  uint64_t burst_errors = 0;
  uint64_t refused_unlogged = 0;
  bool logged_refusal = false;
  std::chrono::steady_clock::time_point last_refusal_log;
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
  auto shared = std::make_shared<ServerShared>(options, std::move(handler), log);
  auto impl = std::make_unique<Impl>(shared, *std::move(ctx));
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
  if (absl::Status st = shared->pool.Start(options.workers); !st.ok()) {
    return st;
  }
  impl->Accept();
  try {
    impl->thread = std::thread([raw = impl.get()] { raw->Run(); });
  } catch (const std::system_error& e) {
    shared->pool.Stop();
    return absl::UnavailableError(absl::StrCat("cannot start the webhook server: ", e.what()));
  }
  auto server = std::unique_ptr<HttpsServer>(new HttpsServer(std::move(impl)));
  log.Info("webhook server listening",
           {{"address", listen},
            {"port", server->port()},
            {"max_connections", options.max_connections},
            {"max_connections_per_peer", options.max_connections_per_peer},
            {"workers", options.workers}});
  return server;
}

HttpsServer::HttpsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

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

HttpsStats HttpsServer::stats() const {
  const ServerShared& s = *impl_->shared;
  return {s.accepts.load(), s.accept_errors.load(), s.refused.load(), s.limiter.connections()};
}

void HttpsServer::Stop() {
  if (!impl_->thread.joinable()) {
    return;
  }
  // The I/O thread first, so nothing runs on it while the workers finish and what they and
  // the budget still hold (sessions) is let go here.
  impl_->io.stop();
  impl_->thread.join();
  beast::error_code ec;
  impl_->acceptor.close(ec);
  impl_->shared->pool.Stop();
  impl_->shared->budget.Close();
}

}  // namespace kmodd::webhook

#include "common/http/server.h"

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/error.hpp>
#include <chrono>
#include <exception>
#include <optional>
#include <system_error>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/http/server_session.h"

namespace kmodd::http {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

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

absl::StatusOr<tcp::endpoint> ParseListen(const ServerOptions& o) {
  const size_t colon = o.listen.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(o.listen.substr(colon + 1), &port) ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(o.name, " address \"", o.listen, "\": expected ADDR:PORT"));
  }
  std::string host = o.listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  beast::error_code ec;
  const asio::ip::address addr = asio::ip::make_address(host.empty() ? o.default_host : host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat(o.name, " address \"", o.listen, "\": ", ec.message()));
  }
  return tcp::endpoint(addr, static_cast<uint16_t>(port));
}

}  // namespace

struct Server::Impl {
  explicit Impl(std::shared_ptr<ServerShared> s) : shared(std::move(s)) {}

  const std::string& name() const { return shared->options.name; }

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
      shared->log.Info(absl::StrCat(name(), " accepts connections again"),
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
      shared->log.Warn(
          absl::StrCat(name(), " cannot accept connections; retrying with backoff up to 1 s"),
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
    std::shared_ptr<TlsServerContext> tls;
    if (shared->options.tls) {
      tls = shared->options.tls();
      if (tls == nullptr) {
        socket.close(ec);  // the owner has no certificate to serve
        return;
      }
    }
    StartSession(std::move(socket), std::move(tls), shared, std::move(*slot), std::move(peer));
  }

  // One line per kRefusalLogEvery at most: a flood of refused connections must not become
  // a flood of log lines.
  void NoteRefusal(const std::string& peer) {
    ++refused_unlogged;
    const auto now = std::chrono::steady_clock::now();
    if (logged_refusal && now - last_refusal_log < kRefusalLogEvery) {
      return;
    }
    shared->log.Warn(absl::StrCat(name(), " connections refused at the connection cap"),
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
      } catch (const std::exception& e) {  // a completion handler threw: log it, serve on
        shared->log.Error(absl::StrCat(name(), " server error"), {{"error", e.what()}});
      } catch (...) {
        shared->log.Error(absl::StrCat(name(), " server error"));
      }
    }
  }

  // The io_context goes last: handlers still queued in it own sessions, and sessions own
  // what they need (ServerShared), so that order is all the shutdown needs.
  asio::io_context io{1};
  // Keeps io.run() going until Stop has waited for the sessions. Without it, once Stop has
  // closed the acceptor and the idle connections, a connection whose request is on a worker
  // has no operation pending on the io_context: run() returns, the I/O thread ends, and the
  // answer the worker then posts is never written (the request Stop promised to answer).
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  tcp::acceptor acceptor{io};
  asio::steady_timer backoff_timer{io};
  std::shared_ptr<ServerShared> shared;
  // The I/O thread's own:
  std::chrono::milliseconds backoff{0};
  uint64_t burst_errors = 0;
  uint64_t refused_unlogged = 0;
  bool logged_refusal = false;
  std::chrono::steady_clock::time_point last_refusal_log;
  std::thread thread;
};

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options, Router routes,
                                                      Logger& log) {
  absl::StatusOr<tcp::endpoint> ep = ParseListen(options);
  if (!ep.ok()) {
    return ep.status();
  }
  const bool workers = routes.NeedsWorkers();
  auto shared = std::make_shared<ServerShared>(options, std::move(routes), log);
  auto impl = std::make_unique<Impl>(shared);
  beast::error_code ec;
  impl->acceptor.open(ep->protocol(), ec);
  if (!ec) {
    impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  }
  if (!ec) {
    impl->acceptor.bind(*ep, ec);
  }
  if (!ec) {
    impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat(options.name, " server on ", options.listen, ": ", ec.message()));
  }
  if (workers) {
    if (absl::Status st = shared->pool.Start(options.workers); !st.ok()) {
      return st;
    }
  }
  impl->Accept();
  try {
    impl->thread = std::thread([raw = impl.get()] { raw->Run(); });
  } catch (const std::system_error& e) {
    shared->pool.Stop();
    return absl::UnavailableError(
        absl::StrCat("cannot start the ", options.name, " server: ", e.what()));
  }
  auto server = std::unique_ptr<Server>(new Server(std::move(impl)));
  log.Info(absl::StrCat(options.name, " server listening"),
           {{"address", options.listen},
            {"port", server->port()},
            {"tls", static_cast<bool>(options.tls)},
            {"max_connections", options.max_connections},
            {"max_connections_per_peer", options.max_connections_per_peer},
            {"workers", workers ? options.workers : 0}});
  return server;
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Stop(); }

uint16_t Server::port() const {
  beast::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

ServerStats Server::stats() const {
  const ServerShared& s = *impl_->shared;
  return {s.accepts.load(), s.accept_errors.load(), s.refused.load(), s.limiter.connections()};
}

void Server::Stop() {
  Impl& impl = *impl_;
  if (!impl.thread.joinable()) {
    return;
  }
  impl.shared->stopping = true;
  asio::post(impl.io, [&impl] {
    beast::error_code ec;
    impl.acceptor.close(ec);
    impl.backoff_timer.cancel();
  });
  for (const std::shared_ptr<ServerConnection>& c : impl.shared->Connections()) {
    c->Shutdown();
  }
  (void)impl.shared->limiter.WaitNone(impl.shared->options.stop_grace);
  // The I/O thread first, so nothing runs on it while the workers finish and what they and
  // the budget still hold (sessions) is let go here.
  impl.work.reset();
  impl.io.stop();
  impl.thread.join();
  beast::error_code ec;
  impl.acceptor.close(ec);  // when the I/O thread stopped before it could
  impl.shared->pool.Stop();
  impl.shared->budget.Close();
}

}  // namespace kmodd::http

#pragma once
// BeastHttpClient's connections, when one may be kept or a request sent again, and the pool
// of idle keep-alive connections. Only common/http/*.cc include this. Header-only: small,
// and used by beast_client.cc alone.

#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "common/http/beast_internal.h"
#include "common/http/headers.h"

namespace kmodd::http {

// One TCP or TLS connection and the io_context it runs on. The io_context is the
// connection's own, not the call's: a kept-alive connection outlives the call that opened it
// and is driven by whichever thread takes it next, one at a time.
struct Connection {
  using TlsStream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

  Connection(std::string pool_key, BeastHttpClient::Tls* tls_context) : key(std::move(pool_key)) {
    if (tls_context != nullptr) {
      tls = std::make_unique<TlsStream>(ioc, tls_context->ctx);
    } else {
      tcp = std::make_unique<boost::beast::tcp_stream>(ioc);
    }
  }

  boost::beast::tcp_stream& Lowest() { return tls ? boost::beast::get_lowest_layer(*tls) : *tcp; }

  // A kept-alive connection has nothing to read. Readable means the server closed it (EOF,
  // or a TLS close_notify) or sent something no request asked for: either way, not usable.
  bool LooksIdle() {
    boost::beast::tcp_stream& lowest = Lowest();
    if (!lowest.socket().is_open()) {
      return false;
    }
    char byte;
    const ssize_t n = ::recv(lowest.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }

  // Declared first, destroyed last: the streams hold its executor.
  boost::asio::io_context ioc;
  std::unique_ptr<boost::beast::tcp_stream> tcp;  // plain HTTP
  std::unique_ptr<TlsStream> tls;                 // HTTPS
  const std::string key;                          // scheme://host:port
  std::chrono::steady_clock::time_point idle_since;
};

// What became of the connection a hop used.
struct HopState {
  // The response was read to its end, keep-alive, nothing left over: the next call may use it.
  bool reusable = false;
  // The server closed the connection before answering, in a way that shows it did not act on
  // the request: worth sending again on a new connection if this one was a kept one.
  bool retryable = false;
};

inline bool IsEof(const boost::beast::error_code& ec) {
  return ec == boost::asio::error::eof || ec == boost::beast::http::error::end_of_stream ||
         ec == boost::asio::ssl::error::stream_truncated;
}

// The ways a server's close of a kept-alive connection shows up: EOF (or a TLS close_notify,
// or none) on the read, a reset or broken pipe on the write or the read.
inline bool ClosedByPeer(const boost::beast::error_code& ec) {
  return IsEof(ec) || ec == boost::asio::error::connection_reset ||
         ec == boost::asio::error::broken_pipe || ec == boost::asio::error::connection_aborted;
}

// RFC 9110 9.2.2: sending these twice has the effect of sending them once.
inline bool IsIdempotent(std::string_view method) {
  return method == "GET" || method == "HEAD" || method == "PUT" || method == "DELETE" ||
         method == "OPTIONS" || method == "TRACE";
}

inline bool AsksToClose(const Headers& headers) {
  const std::optional<std::string> connection = headers.Get("Connection");
  return connection && absl::AsciiStrToLower(*connection).find("close") != std::string::npos;
}

// Idle connections by key, at most `max_idle` of them, none older than `idle_timeout`. A
// connection is owned by one call at a time: Take() hands it out, Put() gives it back.
// Connections closed here are closed outside the lock.
class BeastHttpClient::Pool {
 public:
  using Clock = std::chrono::steady_clock;

  Pool(size_t max_idle, Duration idle_timeout) : max_idle_(max_idle), idle_timeout_(idle_timeout) {}

  // The most recently used idle connection for `key` that still looks usable, or null.
  std::unique_ptr<Connection> Take(const std::string& key) {
    for (;;) {
      std::unique_ptr<Connection> conn;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = std::find_if(idle_.rbegin(), idle_.rend(),
                               [&](const std::unique_ptr<Connection>& c) { return c->key == key; });
        if (it == idle_.rend()) {
          return nullptr;
        }
        conn = std::move(*it);
        idle_.erase(std::next(it).base());
      }
      if (Clock::now() - conn->idle_since < idle_timeout_ && conn->LooksIdle()) {
        return conn;
      }
    }
  }

  void Put(std::unique_ptr<Connection> conn) {
    std::vector<std::unique_ptr<Connection>> closing;
    const Clock::time_point now = Clock::now();
    conn->idle_since = now;
    {
      std::lock_guard<std::mutex> lock(mu_);
      idle_.push_back(std::move(conn));
      // Oldest first: the expired ones, then whatever is over the cap.
      size_t drop = 0;
      while (drop < idle_.size() &&
             (now - idle_[drop]->idle_since >= idle_timeout_ || idle_.size() - drop > max_idle_)) {
        ++drop;
      }
      std::move(idle_.begin(), idle_.begin() + static_cast<std::ptrdiff_t>(drop),
                std::back_inserter(closing));
      idle_.erase(idle_.begin(), idle_.begin() + static_cast<std::ptrdiff_t>(drop));
    }
  }

 private:
  const size_t max_idle_;
  const Duration idle_timeout_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;  // oldest first
};

}  // namespace kmodd::http

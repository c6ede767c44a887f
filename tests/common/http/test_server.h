#pragma once
// A canned HTTP(S) server for the client's tests: one thread on 127.0.0.1, port 0, serving
// connections one after another, each for as long as the client keeps it (or, when asked, a
// thread per connection). Header-only because the unit binary compiles *_test.cc only.

#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/http/headers.h"

namespace kmodd::http::testing {

// What the server got.
struct Received {
  std::string method;
  std::string target;
  Headers headers;
  std::string body;
  std::string sni;  // TLS server name sent by the client, if any
  int connection = 0;  // which connection it came on: 1 for the first accepted
  int nth = 0;         // its place on that connection: 1 for the first request
};

// What the server sends back: raw bytes, written piece by piece with a pause between, so a
// test controls chunk boundaries, truncation and stalls exactly.
struct Canned {
  std::vector<std::string> pieces;
  std::chrono::milliseconds pause{0};
  bool hang = false;   // write the pieces, then hold the connection open without a word
  bool close = false;  // write the pieces, then close the connection
};

// A complete response with a Content-Length.
inline std::string RawResponse(
    int status, const std::string& body,
    const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " Canned\r\n";
  for (const auto& [name, value] : headers) {
    out += name + ": " + value + "\r\n";
  }
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  return out;
}

inline Canned Reply(int status, const std::string& body,
                    const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  return Canned{{RawResponse(status, body, headers)}};
}

// A 200 whose body comes as one chunk per piece, each written separately.
inline Canned ChunkedReply(const std::vector<std::string>& chunks,
                           std::chrono::milliseconds pause = std::chrono::milliseconds(5)) {
  Canned c;
  c.pause = pause;
  c.pieces.push_back("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
  for (const std::string& chunk : chunks) {
    char size[32];
    snprintf(size, sizeof size, "%zx\r\n", chunk.size());
    c.pieces.push_back(size + chunk + "\r\n");
  }
  c.pieces.push_back("0\r\n\r\n");
  return c;
}

class TestServer {
 public:
  using Handler = std::function<Canned(const Received&)>;
  // kConcurrent serves each connection on its own thread, calling the handler concurrently.
  enum Mode { kOneAtATime, kConcurrent };

  // Plain HTTP, or HTTPS when a certificate chain and key (PEM) are given.
  explicit TestServer(Handler handler, const std::string& cert_pem = "",
                      const std::string& key_pem = "", Mode mode = kOneAtATime)
      : handler_(std::move(handler)), mode_(mode), acceptor_(ioc_) {
    namespace asio = boost::asio;
    const asio::ip::tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(asio::socket_base::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    if (!cert_pem.empty()) {
      tls_ = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
      tls_->use_certificate_chain(asio::buffer(cert_pem));
      tls_->use_private_key(asio::buffer(key_pem), asio::ssl::context::pem);
    }
    thread_ = std::thread([this] { Serve(); });
  }

  ~TestServer() {
    stopping_ = true;
    // Wakes the blocking accept(); Linux answers EINVAL.
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    thread_.join();
    {
      // Wakes connection threads waiting for a client's next request.
      std::lock_guard<std::mutex> lock(mu_);
      for (const int fd : open_) {
        ::shutdown(fd, SHUT_RDWR);
      }
    }
    for (std::thread& t : connection_threads_) {
      t.join();
    }
  }

  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  uint16_t port() const { return port_; }
  std::string Url(const std::string& path) const {
    return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_) + path;
  }
  std::vector<Received> received() const {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }
  // Connections accepted so far, and how many of them the server has closed (the client's
  // close included).
  int accepted() const { return accepted_; }
  int closed() const { return closed_; }

 private:
  void Serve() {
    while (!stopping_) {
      auto socket = std::make_shared<boost::asio::ip::tcp::socket>(ioc_);
      boost::system::error_code ec;
      acceptor_.accept(*socket, ec);
      if (ec) {
        if (stopping_) {
          return;
        }
        continue;
      }
      const int id = ++accepted_;
      {
        std::lock_guard<std::mutex> lock(mu_);
        open_.push_back(socket->native_handle());
      }
      if (mode_ == kConcurrent) {
        connection_threads_.emplace_back([this, socket, id] { ServeSocket(*socket, id); });
      } else {
        ServeSocket(*socket, id);
      }
    }
  }

  void ServeSocket(boost::asio::ip::tcp::socket& socket, int id) {
    if (tls_) {
      boost::asio::ssl::stream<boost::asio::ip::tcp::socket&> stream(socket, *tls_);
      boost::system::error_code ec;
      stream.handshake(boost::asio::ssl::stream_base::server, ec);
      // On failure the client refused our certificate: its test checks why.
      if (!ec) {
        const char* sni = SSL_get_servername(stream.native_handle(), TLSEXT_NAMETYPE_host_name);
        ServeConnection(stream, socket, sni ? sni : "", id);
      }
    } else {
      ServeConnection(socket, socket, "", id);
    }
    std::lock_guard<std::mutex> lock(mu_);
    open_.erase(std::find(open_.begin(), open_.end(), socket.native_handle()));
    boost::system::error_code ignored;
    socket.close(ignored);
    ++closed_;
  }

  template <class Stream>
  void ServeConnection(Stream& stream, boost::asio::ip::tcp::socket& socket,
                       const std::string& sni, int id) {
    namespace bhttp = boost::beast::http;
    boost::beast::flat_buffer buffer;
    for (int nth = 1; !stopping_; ++nth) {
      bhttp::request<bhttp::string_body> req;
      boost::system::error_code ec;
      bhttp::read(stream, buffer, req, ec);
      if (ec) {
        if (ec != bhttp::error::end_of_stream) {
          // What real servers do with garbage, a TLS ClientHello included.
          boost::asio::write(stream, boost::asio::buffer(testing::RawResponse(400, "bad request")),
                             ec);
        }
        return;
      }
      Received got;
      got.method = std::string(req.method_string());
      got.target = std::string(req.target());
      for (const auto& field : req) {
        got.headers.Add(std::string(field.name_string()), std::string(field.value()));
      }
      got.body = req.body();
      got.sni = sni;
      got.connection = id;
      got.nth = nth;
      {
        std::lock_guard<std::mutex> lock(mu_);
        received_.push_back(got);
      }
      const Canned reply = handler_(got);
      for (const std::string& piece : reply.pieces) {
        boost::asio::write(stream, boost::asio::buffer(piece), ec);
        if (ec) {
          return;
        }
        std::this_thread::sleep_for(reply.pause);
      }
      if (reply.close) {
        return;  // the socket closes in ServeSocket()
      }
      if (reply.hang) {
        // Hold the connection, silent, until the client gives up or the test ends.
        while (!stopping_) {
          char byte;
          const ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN)) {
            return;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return;
      }
    }
  }

  Handler handler_;
  const Mode mode_;
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::unique_ptr<boost::asio::ssl::context> tls_;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::atomic<int> closed_{0};
  mutable std::mutex mu_;
  std::vector<Received> received_;
  std::vector<int> open_;  // connections' descriptors, until closed
  std::vector<std::thread> connection_threads_;
  std::thread thread_;
};

}  // namespace kmodd::http::testing

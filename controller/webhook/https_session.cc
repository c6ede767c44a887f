#include "controller/webhook/https_session.h"

#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <exception>
#include <optional>
#include <utility>

namespace kmodd::webhook {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Request = http::request<http::string_body>;

// After a 413 the client may still be sending its body. Reading and dropping it, up to this
// much and within body_timeout, lets a client that reads only once it has written see the
// answer rather than a reset.
constexpr size_t kDrainLimit = 16 << 20;
constexpr size_t kDrainChunk = 64 << 10;
constexpr size_t kHeaderLimit = 16 << 10;

HttpsReply Handle(const ServerShared& s, const Request& req) {
  try {
    return s.handler(std::string(req.method_string()), std::string(req.target()), req.body());
  } catch (const std::exception& e) {
    s.log.Error("webhook request failed",
                {{"target", std::string(req.target())}, {"error", e.what()}});
  } catch (...) {
    s.log.Error("webhook request failed", {{"target", std::string(req.target())}});
  }
  return {500, "text/plain", "internal error: see the controller's log\n"};
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<ssl::context> context,
          std::shared_ptr<ServerShared> shared, ConnectionLimiter::Slot slot, std::string peer)
      : executor_(socket.get_executor()), context_(std::move(context)),
        stream_(std::move(socket), *context_), shared_(std::move(shared)),
        slot_(std::move(slot)), peer_(std::move(peer)) {}

  void Run() {
    Arm(options().header_timeout);  // the handshake and the first request's headers
    stream_.async_handshake(ssl::stream_base::server,
                            [self = shared_from_this()](beast::error_code ec) {
                              if (!ec) {
                                self->ReadHeader(/*arm=*/false);
                              }
                            });
  }

 private:
  enum class After { kRead, kDrain, kClose };

  const HttpsOptions& options() const { return shared_->options; }

  void Arm(std::chrono::milliseconds timeout) {
    beast::get_lowest_layer(stream_).expires_after(timeout);
  }

  void ReadHeader(bool arm) {
    parser_.emplace();
    parser_->body_limit(options().body_limit);
    parser_->header_limit(kHeaderLimit);
    if (arm) {
      Arm(options().header_timeout);
    }
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              self->OnHeader(ec);
                            });
  }

  void OnHeader(beast::error_code ec) {
    if (ec == http::error::body_limit) {  // by its Content-Length
      Refuse413();
      return;
    }
    if (ec) {
      Close();
      return;
    }
    size_t size = 0;
    if (const auto n = parser_->content_length()) {
      size = static_cast<size_t>(*n);
    } else if (parser_->chunked()) {
      size = options().body_limit;
    }
    large_ = size > options().large_body;
    if (!large_) {
      ReadBody();
      return;
    }
    shared_->budget.Acquire(peer_, size, [self = shared_from_this()](BodyBudget::Lease lease) {
      const asio::any_io_executor ex = self->executor_;
      asio::post(ex, [self, lease = std::move(lease)]() mutable {
        self->lease_ = std::move(lease);
        self->ReadBody();
      });
    });
  }

  void ReadBody() {
    Arm(options().body_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->OnBody(ec);
                     });
  }

  void OnBody(beast::error_code ec) {
    if (ec == http::error::body_limit) {  // chunked, past the limit
      lease_.Release();
      Refuse413();
      return;
    }
    if (ec) {
      Close();
      return;
    }
    Request req = parser_->release();
    parser_.reset();
    const bool keep_alive = req.keep_alive();
    beast::get_lowest_layer(stream_).expires_never();  // nothing is read or written meanwhile
    shared_->pool.Submit(peer_, large_, [self = shared_from_this(), req = std::move(req),
                                         keep_alive]() mutable {
      HttpsReply reply = Handle(*self->shared_, req);
      req = {};  // the body goes before the lease that counts it
      const asio::any_io_executor ex = self->executor_;
      asio::post(ex, [self = std::move(self), reply = std::move(reply), keep_alive]() {
        self->lease_.Release();
        self->Reply(reply, keep_alive ? After::kRead : After::kClose);
      });
    });
  }

  void Refuse413() { Reply({413, "text/plain", "request body over the limit\n"}, After::kDrain); }

  void Reply(const HttpsReply& r, After after) {
    response_ = {};
    response_.version(11);
    response_.result(static_cast<unsigned>(r.status));
    response_.set(http::field::content_type, r.content_type);
    response_.body() = r.body;
    response_.keep_alive(after == After::kRead);
    response_.prepare_payload();
    Arm(options().write_timeout);
    http::async_write(stream_, response_,
                      [self = shared_from_this(), after](beast::error_code ec, size_t) {
                        if (ec || after == After::kClose) {
                          self->Close();
                        } else if (after == After::kRead) {
                          self->ReadHeader(/*arm=*/true);
                        } else {
                          self->Drain();
                        }
                      });
  }

  void Drain() {
    Arm(options().body_timeout);
    buffer_.clear();
    DrainSome();
  }

  void DrainSome() {
    stream_.async_read_some(buffer_.prepare(kDrainChunk),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > kDrainLimit) {
                                self->Close();
                              } else {
                                self->DrainSome();
                              }
                            });
  }

  void Close() {
    Arm(options().write_timeout);
    stream_.async_shutdown([self = shared_from_this()](beast::error_code) {});
  }

  const asio::any_io_executor executor_;   // the connection's strand
  std::shared_ptr<ssl::context> context_;  // the context this connection was accepted with
  beast::ssl_stream<beast::tcp_stream> stream_;
  std::shared_ptr<ServerShared> shared_;
  ConnectionLimiter::Slot slot_;
  const std::string peer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool large_ = false;
  BodyBudget::Lease lease_;  // the memory of a large body, while it is held
  http::response<http::string_body> response_;
  size_t drained_ = 0;
};

}  // namespace

void StartSession(tcp::socket socket, std::shared_ptr<ssl::context> context,
                  std::shared_ptr<ServerShared> shared, ConnectionLimiter::Slot slot,
                  std::string peer) {
  std::make_shared<Session>(std::move(socket), std::move(context), std::move(shared),
                            std::move(slot), std::move(peer))
      ->Run();
}

}  // namespace kmodd::webhook

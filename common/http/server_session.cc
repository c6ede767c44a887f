#include "common/http/server_session.h"

#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kmodd::http {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// After a refusal (413, 431, 400) the client may still be sending. Reading and dropping
// that, up to this much and within body_timeout, lets a client that reads only once it has
// written see the answer rather than a reset.
constexpr size_t kDrainLimit = 16 << 20;
constexpr size_t kDrainChunk = 64 << 10;

ServerReply Handle(const ServerShared& s, const ServerHandler& handler, const ServerRequest& r) {
  try {
    return handler(r);
  } catch (const std::exception& e) {
    s.log.Error(absl::StrCat(s.options.name, " request failed"),
                {{"target", r.target}, {"error", e.what()}});
  } catch (...) {
    s.log.Error(absl::StrCat(s.options.name, " request failed"), {{"target", r.target}});
  }
  return {500, "text/plain", "internal error: see the server's log\n"};
}

// What the parser says of a request it refuses, or nullopt when the connection just ended
// (closed, reset, timed out).
std::optional<ServerReply> Refusal(const beast::error_code& ec) {
  if (ec == bhttp::error::header_limit) {
    return ServerReply{431, "text/plain", "request headers over the limit\n"};
  }
  if (ec == bhttp::error::body_limit) {
    return ServerReply{413, "text/plain", "request body over the limit\n"};
  }
  if (ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category() &&
      ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
    return ServerReply{400, "text/plain", absl::StrCat("bad request: ", ec.message(), "\n")};
  }
  return std::nullopt;
}

template <class Stream>
class Session : public ServerConnection, public std::enable_shared_from_this<Session<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  Session(tcp::socket socket, std::shared_ptr<TlsServerContext> tls,
          std::shared_ptr<ServerShared> shared, ConnectionLimiter::Slot slot, std::string peer)
      : executor_(socket.get_executor()),
        tls_(std::move(tls)),
        stream_(MakeStream(std::move(socket))),
        shared_(std::move(shared)),
        slot_(std::move(slot)),
        peer_(std::move(peer)) {}

  ~Session() override { shared_->Unregister(id_); }

  void Run() {
    id_ = shared_->Register(this->weak_from_this());
    if (shared_->stopping) {
      return;  // registered after Stop looked: it would not be shut down; the socket closes
    }
    Arm(options().header_timeout);  // the handshake and the first request's headers
    if constexpr (kTls) {
      // No request yet: Stop ends a handshake as it ends a wait for headers.
      waiting_ = true;
      stream_.async_handshake(ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                self->waiting_ = false;
                                if (!ec) {
                                  self->ReadHeader(/*arm=*/false);
                                }
                              });
    } else {
      ReadHeader(/*arm=*/false);
    }
  }

  void Shutdown() override {
    asio::post(executor_, [self = this->shared_from_this()] {
      if (self->waiting_) {
        beast::get_lowest_layer(self->stream_).cancel();  // the read ends: Close
      }
    });
  }

 private:
  enum class After { kRead, kDrain, kClose };

  Stream MakeStream(tcp::socket socket) {
    if constexpr (kTls) {
      return Stream(std::move(socket), tls_->context);
    } else {
      return Stream(std::move(socket));
    }
  }

  const ServerOptions& options() const { return shared_->options; }

  void Arm(std::chrono::milliseconds timeout) {
    beast::get_lowest_layer(stream_).expires_after(timeout);
  }

  void ReadHeader(bool arm) {
    if (shared_->stopping) {
      Close();
      return;
    }
    parser_.emplace();
    parser_->body_limit(options().body_limit);
    parser_->header_limit(static_cast<uint32_t>(options().header_limit));
    if (arm) {
      Arm(options().header_timeout);
    }
    waiting_ = true;
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = this->shared_from_this()](beast::error_code ec, size_t) {
                               self->waiting_ = false;
                               self->OnHeader(ec);
                             });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) {
      Refuse(ec);  // body_limit here: by its Content-Length
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
    shared_->budget.Acquire(peer_, size,
                            [self = this->shared_from_this()](BodyBudget::Lease lease) {
                              const asio::any_io_executor ex = self->executor_;
                              asio::post(ex, [self, lease = std::move(lease)]() mutable {
                                self->lease_ = std::move(lease);
                                self->ReadBody();
                              });
                            });
  }

  void ReadBody() {
    Arm(options().body_timeout);
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = this->shared_from_this()](beast::error_code ec, size_t) {
                        self->OnBody(ec);
                      });
  }

  void OnBody(beast::error_code ec) {
    if (ec) {
      lease_.Release();
      Refuse(ec);  // body_limit here: chunked, past the limit
      return;
    }
    bhttp::request<bhttp::string_body> req = parser_->release();
    parser_.reset();
    const bool keep_alive = req.keep_alive();
    const Router::Match route =
        shared_->routes.Find(std::string(req.method_string()), std::string(req.target()));
    if (route.handler == nullptr) {
      lease_.Release();
      Reply(route.refusal, keep_alive ? After::kRead : After::kClose);
      return;
    }
    ServerRequest r{std::string(req.method_string()), std::string(req.target()),
                    std::move(req.body()), peer_};
    req = {};
    if (route.where == RunOn::kIoThread) {
      const ServerReply reply = Handle(*shared_, *route.handler, r);
      lease_.Release();
      Reply(ForMethod(r.method, reply), keep_alive ? After::kRead : After::kClose);
      return;
    }
    beast::get_lowest_layer(stream_).expires_never();  // nothing is read or written meanwhile
    shared_->pool.Submit(peer_, large_,
                         [self = this->shared_from_this(), handler = route.handler,
                          r = std::move(r), keep_alive]() mutable {
                           ServerReply reply =
                               ForMethod(r.method, Handle(*self->shared_, *handler, r));
                           r = {};  // the body goes before the lease that counts it
                           const asio::any_io_executor ex = self->executor_;
                           asio::post(ex, [self = std::move(self), reply = std::move(reply),
                                           keep_alive]() {
                             self->lease_.Release();
                             self->Reply(reply, keep_alive ? After::kRead : After::kClose);
                           });
                         });
  }

  static ServerReply ForMethod(const std::string& method, ServerReply reply) {
    if (method == "HEAD") {
      reply.body.clear();
    }
    return reply;
  }

  void Refuse(const beast::error_code& ec) {
    if (std::optional<ServerReply> r = Refusal(ec)) {
      Reply(*r, After::kDrain);
    } else {
      Close();
    }
  }

  void Reply(const ServerReply& r, After after) {
    if (after == After::kRead && shared_->stopping) {
      after = After::kClose;
    }
    response_ = {};
    response_.version(11);
    response_.result(static_cast<unsigned>(r.status));
    response_.set(bhttp::field::content_type, r.content_type);
    response_.body() = r.body;
    response_.keep_alive(after == After::kRead);
    response_.prepare_payload();
    Arm(options().write_timeout);
    bhttp::async_write(stream_, response_,
                       [self = this->shared_from_this(), after](beast::error_code ec, size_t) {
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
    if constexpr (!kTls) {
      // The answer is all the client gets: the end of the stream tells it so at once, and
      // whatever it still sends is read until it closes.
      beast::error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    }
    Arm(options().body_timeout);
    buffer_.clear();
    DrainSome();
  }

  void DrainSome() {
    stream_.async_read_some(buffer_.prepare(kDrainChunk),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > kDrainLimit) {
                                self->Close();
                              } else {
                                self->DrainSome();
                              }
                            });
  }

  void Close() {
    if constexpr (kTls) {
      Arm(options().write_timeout);
      stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {});
    } else {
      beast::error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    }
  }

  const asio::any_io_executor executor_;    // the connection's strand
  std::shared_ptr<TlsServerContext> tls_;  // the context this connection was accepted with
  Stream stream_;
  std::shared_ptr<ServerShared> shared_;
  ConnectionLimiter::Slot slot_;
  const std::string peer_;
  uint64_t id_ = 0;
  bool waiting_ = false;  // for the handshake or a request's headers: Shutdown ends it
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bool large_ = false;
  BodyBudget::Lease lease_;  // the memory of a large body, while it is held
  bhttp::response<bhttp::string_body> response_;
  size_t drained_ = 0;
};

}  // namespace

uint64_t ServerShared::Register(const std::weak_ptr<ServerConnection>& c) {
  std::lock_guard lock(mu_);
  all_.emplace(++next_id_, c);
  return next_id_;
}

void ServerShared::Unregister(uint64_t id) {
  std::lock_guard lock(mu_);
  all_.erase(id);
}

std::vector<std::shared_ptr<ServerConnection>> ServerShared::Connections() {
  std::vector<std::shared_ptr<ServerConnection>> out;
  std::lock_guard lock(mu_);
  for (const auto& [id, weak] : all_) {
    if (std::shared_ptr<ServerConnection> c = weak.lock()) {
      out.push_back(std::move(c));
    }
  }
  return out;
}

void StartSession(tcp::socket socket, std::shared_ptr<TlsServerContext> tls,
                  std::shared_ptr<ServerShared> shared, ConnectionLimiter::Slot slot,
                  std::string peer) {
  if (tls != nullptr) {
    std::make_shared<Session<TlsStream>>(std::move(socket), std::move(tls), std::move(shared),
                                         std::move(slot), std::move(peer))
        ->Run();
  } else {
    std::make_shared<Session<PlainStream>>(std::move(socket), nullptr, std::move(shared),
                                           std::move(slot), std::move(peer))
        ->Run();
  }
}

}  // namespace kmodd::http

#include "common/http/beast_client.h"

#include <algorithm>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/http/beast_internal.h"
#include "common/http/beast_pool.h"

namespace kmodd::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

constexpr size_t kReadChunk = 64 << 10;
constexpr uint32_t kHeaderLimit = 64 << 10;

bool IsRedirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

bool IsTokenChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar);
}

// A header value may not end the field or the request early.
bool IsFieldValue(std::string_view s) {
  return s.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

absl::Status ValidateRequest(const Request& request) {
  if (!IsToken(request.method)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid HTTP method \"", request.method, "\""));
  }
  for (const auto& [name, value] : request.headers.fields()) {
    if (!IsToken(name) || !IsFieldValue(value)) {
      // The value is not shown: it may be a credential.
      return absl::InvalidArgumentError(absl::StrCat("invalid HTTP header \"", name, "\""));
    }
  }
  return absl::OkStatus();
}

std::string Millis(Duration d) { return absl::StrCat(d.count(), "ms"); }

// Runs asynchronous operations one at a time on the io_context of the connection in use.
// Each is bounded by the idle timeout and by what is left of the whole request's deadline,
// through the stream's own timer (beast::tcp_stream cancels the operation when it fires).
class Timed {
 public:
  Timed(Duration total, Duration idle, Cancellation* cancel)
      : deadline_(Clock::now() + total), total_(total), idle_(idle), cancel_(cancel) {}
  ~Timed() { Unbind(); }
  Timed(const Timed&) = delete;
  Timed& operator=(const Timed&) = delete;

  // Operations run on `ioc` until Unbind(), and Cancel() stops it meanwhile. Unbind before
  // the connection goes back to the pool: a late Cancel() must not stop another call.
  void Bind(asio::io_context* ioc) {
    Unbind();
    ioc_ = ioc;
    if (cancel_ != nullptr) {
      cancel_->Attach(ioc_);
    }
  }
  void Unbind() {
    if (ioc_ != nullptr && cancel_ != nullptr) {
      cancel_->Detach(ioc_);
    }
    ioc_ = nullptr;
  }

  asio::io_context& ioc() { return *ioc_; }

  template <class Initiate>
  beast::error_code Run(beast::tcp_stream& lowest, Initiate&& initiate) {
    const auto left = std::chrono::duration_cast<Duration>(deadline_ - Clock::now());
    by_deadline_ = left < idle_;
    if (left <= Duration::zero()) {
      return beast::error::timeout;
    }
    // Restarted before the check: a Cancel() after it stops the run() below.
    ioc_->restart();
    if (Cancelled()) {
      return asio::error::operation_aborted;
    }
    lowest.expires_after(std::min(left, idle_));
    beast::error_code result = asio::error::would_block;
    std::forward<Initiate>(initiate)([&result](beast::error_code ec, auto&&...) { result = ec; });
    ioc_->run();
    if (result == asio::error::would_block) {
      // Stopped by Cancel(): abort the operation and let its handler run while `result`
      // is still in scope.
      lowest.cancel();
      ioc_->restart();
      ioc_->run();
      result = asio::error::operation_aborted;
    }
    return result;
  }

  // Runs the io_context until its work is done or Cancel(); false when cancelled.
  bool RunAll() {
    ioc_->restart();
    if (Cancelled()) {
      return false;
    }
    ioc_->run();
    return !Cancelled();
  }

  bool Cancelled() const { return cancel_ != nullptr && cancel_->cancelled(); }

  std::string TimeoutText() const {
    return by_deadline_ ? absl::StrCat("the request took longer than ", Millis(total_))
                        : absl::StrCat("no progress for ", Millis(idle_));
  }

 private:
  asio::io_context* ioc_ = nullptr;
  const Clock::time_point deadline_;
  const Duration total_;
  const Duration idle_;
  Cancellation* const cancel_;
  bool by_deadline_ = false;
};

// Keeps `timed` on a connection's io_context for a scope.
class Bound {
 public:
  Bound(Timed& timed, asio::io_context& ioc) : timed_(timed) { timed_.Bind(&ioc); }
  ~Bound() { timed_.Unbind(); }
  Bound(const Bound&) = delete;
  Bound& operator=(const Bound&) = delete;

 private:
  Timed& timed_;
};

// What one request on one connection produced: a final response, or where to go next.
struct Hop {
  Response response;
  std::optional<std::string> location;
};

// One call of Fetch or Stream: every hop of it, redirects included.
class Exchange {
 public:
  using TlsSource = std::function<absl::StatusOr<BeastHttpClient::Tls*>()>;
  // `pool`: where to find and leave kept-alive connections; null for none.
  Exchange(const ClientOptions& options, TlsSource tls, BeastHttpClient::Pool* pool,
           const Request& request, const BodyHandler* handler)
      : options_(options),
        tls_source_(std::move(tls)),
        pool_(pool),
        request_(request),
        handler_(handler),
        timed_(request.timeout.value_or(options.timeout),
               request.idle_timeout.value_or(options.idle_timeout), request.cancel) {}

  absl::StatusOr<Response> Run();

 private:
  absl::StatusOr<Hop> HopTo(const Url& url, const std::string& method, const Headers& headers,
                            const std::string& body);
  // Connects a new connection, and makes the TLS handshake on an https one.
  absl::Status Open(Connection& conn, const Url& url);
  template <class Stream>
  absl::StatusOr<Hop> HopOn(Stream& stream, const Url& url, const std::string& method,
                            const Headers& headers, const std::string& body, HopState& state);
  absl::Status Connect(beast::tcp_stream& tcp, const Url& url);
  template <class Stream>
  absl::Status ReadBody(Stream& stream, beast::flat_buffer& buffer,
                        bhttp::response_parser<bhttp::buffer_body>& parser, const Url& url,
                        const std::function<absl::Status(const char*, size_t)>& sink,
                        const bool& stop);
  absl::Status Transport(const beast::error_code& ec, std::string_view phase, const Url& url) {
    if (timed_.Cancelled()) {
      return absl::CancelledError(
          absl::StrCat(UrlForMessage(url), ": cancelled during ", std::string(phase)));
    }
    return TransportStatus(ec, phase, url, timed_.TimeoutText());
  }

  const ClientOptions& options_;
  TlsSource tls_source_;
  BeastHttpClient::Tls* tls_ = nullptr;  // set by HopTo for an https hop on a new connection
  BeastHttpClient::Pool* const pool_;
  const Request& request_;
  const BodyHandler* handler_;  // null: buffer the body
  Timed timed_;
};

absl::StatusOr<Response> Exchange::Run() {
  if (absl::Status s = ValidateRequest(request_); !s.ok()) {
    return s;
  }
  absl::StatusOr<Url> url = ParseUrl(request_.url);
  if (!url.ok()) {
    return url.status();
  }
  const Url origin = *url;
  std::string method = request_.method;
  std::string body = request_.body;
  Headers headers = request_.headers;
  headers.Remove("Host");
  for (int redirects = 0;; ++redirects) {
    // Credentials go only to the server they were given for: registries redirect blob
    // downloads to storage that authenticates with its own signed URL.
    Headers sent = headers;
    if (url->Authority() != origin.Authority()) {
      sent.Remove("Authorization");
    }
    absl::StatusOr<Hop> hop = HopTo(*url, method, sent, body);
    if (!hop.ok()) {
      return hop.status();
    }
    if (!hop->location) {
      hop->response.redirects = redirects;
      return std::move(hop->response);
    }
    if (redirects >= options_.max_redirects) {
      return absl::FailedPreconditionError(
          absl::StrCat("stopped after ", redirects, " redirects at ", UrlForMessage(*url)));
    }
    absl::StatusOr<Url> next = ResolveLocation(*url, *hop->location);
    if (!next.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          UrlForMessage(*url), " redirected to a bad location: ", next.status().message()));
    }
    if (url->IsHttps() && !next->IsHttps() && !options_.allow_redirect_to_http) {
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing redirect from ", UrlForMessage(*url), " to plain HTTP ", UrlForMessage(*next)));
    }
    const int status = hop->response.status;
    if (status == 303 || ((status == 301 || status == 302) && method == "POST")) {
      method = method == "HEAD" ? "HEAD" : "GET";
      body.clear();
      headers.Remove("Content-Type");
    }
    url = std::move(next);
  }
}

absl::StatusOr<Hop> Exchange::HopTo(const Url& url, const std::string& method,
                                    const Headers& headers, const std::string& body) {
  // TLS settings are the client's, the same for every connection in its pool.
  const std::string key = absl::StrCat(url.scheme, "://", url.Authority());
  // At most two attempts: a kept connection, then (only if the server had closed it) a new one.
  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<Connection> conn;
    if (pool_ != nullptr && attempt == 0) {
      conn = pool_->Take(key);
    }
    const bool reused = conn != nullptr;
    if (!reused) {
      BeastHttpClient::Tls* tls = nullptr;
      if (url.IsHttps()) {
        absl::StatusOr<BeastHttpClient::Tls*> made = tls_source_();
        if (!made.ok()) {
          return made.status();
        }
        tls = tls_ = *made;
      }
      conn = std::make_unique<Connection>(key, tls);
    }
    HopState state;
    absl::StatusOr<Hop> hop;
    {
      const Bound bound(timed_, conn->ioc);
      if (!reused) {
        if (absl::Status s = Open(*conn, url); !s.ok()) {
          return s;
        }
      }
      hop = conn->tls ? HopOn(*conn->tls, url, method, headers, body, state)
                      : HopOn(*conn->tcp, url, method, headers, body, state);
    }
    if (pool_ != nullptr && state.reusable) {
      pool_->Put(std::move(conn));
    }
    if (hop.ok() || !reused || !state.retryable) {
      return hop;
    }
  }
}

absl::Status Exchange::Open(Connection& conn, const Url& url) {
  beast::tcp_stream& tcp = conn.Lowest();
  if (absl::Status s = Connect(tcp, url); !s.ok()) {
    return s;
  }
  if (!conn.tls) {
    return absl::OkStatus();
  }
  TlsStream& stream = *conn.tls;
  if (absl::Status s = PrepareTls(stream.native_handle(), url, tls_->verify); !s.ok()) {
    return s;
  }
  const beast::error_code ec = timed_.Run(tcp, [&](auto handler) {
    stream.async_handshake(asio::ssl::stream_base::client, std::move(handler));
  });
  if (ec && timed_.Cancelled()) {
    return Transport(ec, "TLS handshake", url);
  }
  if (ec) {
    return HandshakeStatus(ec, stream.native_handle(), tls_->verify, url, timed_.TimeoutText());
  }
  return absl::OkStatus();
}

absl::Status Exchange::Connect(beast::tcp_stream& tcp, const Url& url) {
  beast::error_code ec;
  const asio::ip::address literal = asio::ip::make_address(url.host, ec);
  if (!ec) {
    ec = timed_.Run(tcp, [&](auto handler) {
      tcp.async_connect(tcp::endpoint(literal, url.port), std::move(handler));
    });
    return ec ? Transport(ec, "connect", url) : absl::OkStatus();
  }
  tcp::resolver resolver(timed_.ioc());
  tcp::resolver::results_type endpoints;
  resolver.async_resolve(url.host, std::to_string(url.port),
                         [&](beast::error_code e, tcp::resolver::results_type r) {
                           ec = e;
                           endpoints = std::move(r);
                         });
  if (!timed_.RunAll()) {
    resolver.cancel();
    timed_.ioc().restart();
    timed_.ioc().run();
    return Transport(asio::error::operation_aborted, "resolve", url);
  }
  if (ec) {
    return Transport(ec, "resolve", url);
  }
  ec = timed_.Run(tcp, [&](auto handler) {
    tcp.async_connect(endpoints, [h = std::move(handler)](beast::error_code e,
                                                          const tcp::endpoint&) mutable { h(e); });
  });
  return ec ? Transport(ec, "connect", url) : absl::OkStatus();
}

template <class Stream>
absl::StatusOr<Hop> Exchange::HopOn(Stream& stream, const Url& url, const std::string& method,
                                    const Headers& headers, const std::string& body,
                                    HopState& state) {
  beast::tcp_stream& tcp = beast::get_lowest_layer(stream);
  bhttp::request<bhttp::string_body> req;
  req.version(11);
  if (const bhttp::verb verb = bhttp::string_to_verb(method); verb != bhttp::verb::unknown) {
    req.method(verb);
  } else {
    req.method_string(method);
  }
  req.target(url.target);
  req.set(bhttp::field::host, url.HostHeader());
  if (!headers.Has("User-Agent")) {
    req.set(bhttp::field::user_agent, options_.user_agent);
  }
  for (const auto& [name, value] : headers.fields()) {
    req.insert(name, value);
  }
  req.body() = body;
  req.prepare_payload();
  beast::error_code ec =
      timed_.Run(tcp, [&](auto handler) { bhttp::async_write(stream, req, std::move(handler)); });
  if (ec) {
    // A request the server did not take whole is one it cannot have acted on.
    state.retryable = !timed_.Cancelled() && ClosedByPeer(ec);
    return Transport(ec, "send request", url);
  }

  beast::flat_buffer buffer;
  // Beast reads at most what the buffer has room for (at least 512 bytes), and with a
  // buffer_body the parser empties it at once, so it never grows: without room made here,
  // a 100 MB blob takes 200,000 reads, five times curl's time.
  buffer.reserve(kReadChunk);
  bhttp::response_parser<bhttp::buffer_body> parser;
  parser.header_limit(kHeaderLimit);
  // The sinks below enforce what the caller asked for. (Boost 1.74 has no optional
  // overload: boost::none would convert to a limit of 0.)
  parser.body_limit((std::numeric_limits<std::uint64_t>::max)());
  if (method == "HEAD") {
    parser.skip(true);
  }
  ec = timed_.Run(tcp, [&](auto handler) {
    bhttp::async_read_header(stream, buffer, parser, std::move(handler));
  });
  if (ec) {
    // Not a byte of an answer: a server closing an idle connection as the request arrived.
    // A POST or PATCH is sent again only after a clean close (the server read nothing and
    // said goodbye); a reset may follow a request it had read, so only idempotent ones.
    const bool nothing = !parser.got_some() && buffer.size() == 0;
    state.retryable = !timed_.Cancelled() && nothing &&
                      (IsEof(ec) || (ClosedByPeer(ec) && IsIdempotent(method)));
    return Transport(ec, "read response", url);
  }

  Hop hop;
  Response& response = hop.response;
  const auto& head = parser.get();
  response.status = static_cast<int>(head.result_int());
  response.reason = std::string(head.reason());
  for (const auto& field : head) {
    response.headers.Add(std::string(field.name_string()), std::string(field.value()));
  }
  response.url = url;
  if (request_.follow_redirects && IsRedirect(response.status)) {
    if (auto location = response.headers.Get("Location")) {
      hop.location = std::move(location);
      return hop;  // its body is of no interest; the connection closes with `stream`
    }
  }

  const bool success = response.status >= 200 && response.status < 300;
  bool stop = false;
  std::function<absl::Status(const char*, size_t)> sink;
  if (handler_ == nullptr) {
    const size_t limit = request_.max_body_bytes;
    if (parser.content_length() && *parser.content_length() > limit) {
      return absl::ResourceExhaustedError(absl::StrCat(UrlForMessage(url), ": body of ",
                                                       *parser.content_length(),
                                                       " bytes is over the limit of ", limit));
    }
    sink = [&response, &url, limit](const char* data, size_t n) {
      if (response.body.size() + n > limit) {
        return absl::ResourceExhaustedError(
            absl::StrCat(UrlForMessage(url), ": body is over the limit of ", limit, " bytes"));
      }
      response.body.append(data, n);
      return absl::OkStatus();
    };
  } else if (success) {
    if (handler_->on_head) {
      if (absl::Status s = handler_->on_head(response); !s.ok()) {
        return s;
      }
    }
    sink = handler_->on_data;
  } else {
    // Keep the start of an error body for the caller's message and drop the rest.
    sink = [&response, &stop](const char* data, size_t n) {
      const size_t take = std::min(n, kMaxErrorBody - response.body.size());
      response.body.append(data, take);
      stop = response.body.size() >= kMaxErrorBody;
      return absl::OkStatus();
    };
  }
  if (absl::Status s = ReadBody(stream, buffer, parser, url, sink, stop); !s.ok()) {
    return s;
  }
  bool leftover = buffer.size() > 0;
  if constexpr (std::is_same_v<Stream, TlsStream>) {
    leftover = leftover || SSL_pending(stream.native_handle()) > 0;
  }
  state.reusable = parser.is_done() && parser.keep_alive() && !stop && !leftover &&
                   !AsksToClose(headers) && !timed_.Cancelled();
  return hop;
}

template <class Stream>
absl::Status Exchange::ReadBody(Stream& stream, beast::flat_buffer& buffer,
                                bhttp::response_parser<bhttp::buffer_body>& parser, const Url& url,
                                const std::function<absl::Status(const char*, size_t)>& sink,
                                const bool& stop) {
  std::vector<char> chunk(kReadChunk);
  beast::tcp_stream& tcp = beast::get_lowest_layer(stream);
  while (!parser.is_done() && !stop) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    // read_some returns as soon as there is something, so the caller sees progress (and
    // every byte received before a failure) without waiting for a full chunk.
    beast::error_code ec = timed_.Run(tcp, [&](auto handler) {
      bhttp::async_read_some(stream, buffer, parser, std::move(handler));
    });
    if (ec == bhttp::error::need_buffer) {
      ec = {};
    }
    const size_t n = chunk.size() - parser.get().body().size;
    if (n > 0 && sink) {
      if (absl::Status s = sink(chunk.data(), n); !s.ok()) {
        return s;
      }
    }
    if (ec) {
      return Transport(ec, "read body", url);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<BeastHttpClient>> BeastHttpClient::Create(ClientOptions options) {
  // Loading the system CA bundle costs ~30 ms of CPU: done at the first https request, so
  // a plain-HTTP registry never pays it. CAs and client keys given explicitly are checked now.
  std::unique_ptr<Tls> tls;
  if (!options.tls.ca_file.empty() || !options.tls.ca_pem.empty() ||
      !options.tls.client_cert_pem.empty() || !options.tls.client_key_pem.empty()) {
    absl::StatusOr<std::unique_ptr<Tls>> made = MakeTls(options.tls);
    if (!made.ok()) {
      return made.status();
    }
    tls = *std::move(made);
  }
  return std::unique_ptr<BeastHttpClient>(new BeastHttpClient(std::move(options), std::move(tls)));
}

BeastHttpClient::BeastHttpClient(ClientOptions options, std::unique_ptr<Tls> tls)
    : options_(std::move(options)), tls_(std::move(tls)) {
  if (options_.reuse_connections) {
    pool_ = std::make_unique<Pool>(options_.max_idle_connections,
                                   options_.idle_connection_timeout);
  }
}

absl::StatusOr<BeastHttpClient::Tls*> BeastHttpClient::TlsContext() {
  std::lock_guard<std::mutex> lock(tls_mu_);
  if (!tls_) {
    absl::StatusOr<std::unique_ptr<Tls>> made = MakeTls(options_.tls);
    if (!made.ok()) {
      return made.status();
    }
    tls_ = *std::move(made);
  }
  return tls_.get();
}

BeastHttpClient::~BeastHttpClient() = default;

absl::StatusOr<Response> BeastHttpClient::Fetch(const Request& request) {
  return Do(request, nullptr);
}

absl::StatusOr<Response> BeastHttpClient::Stream(const Request& request,
                                                 const BodyHandler& handler) {
  return Do(request, &handler);
}

absl::StatusOr<Response> BeastHttpClient::Do(const Request& request, const BodyHandler* handler) {
  // Boost and the standard library report some failures (allocation, a broken io_context) by
  // throwing; none of that crosses this API.
  try {
    // Stream() has its connection to itself: a watch or a download holds it for long.
    Exchange exchange(options_, [this] { return TlsContext(); },
                      handler == nullptr ? pool_.get() : nullptr, request, handler);
    return exchange.Run();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("HTTP ", request.method, ": ", e.what()));
  }
}

}  // namespace kmodd::http

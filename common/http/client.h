#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/http/cancel.h"
#include "common/http/headers.h"
#include "common/http/url.h"

namespace kmodd::http {

using Duration = std::chrono::milliseconds;

struct Request {
  std::string method = "GET";
  std::string url;  // absolute http:// or https://; plain http only when the caller says so
  Headers headers;  // sent as given (Range, Accept, Authorization, ...); Host is set for you
  std::string body;
  // The whole exchange, redirects included, must finish within `timeout`; no single connect,
  // handshake, read or write may wait longer than `idle_timeout`. Unset: the client's default.
  std::optional<Duration> timeout;
  std::optional<Duration> idle_timeout;
  bool follow_redirects = true;
  // Fetch() fails with ResourceExhausted rather than buffer a larger body.
  size_t max_body_bytes = 16 << 20;
  // When set (not owned; must outlive the call), Cancel() on it ends the call from another
  // thread with Cancelled: a watch stream can stay silent for minutes.
  Cancellation* cancel = nullptr;
};

struct Response {
  int status = 0;
  std::string reason;
  Headers headers;
  // Fetch(): the whole body. Stream(): empty for 2xx (it went to the handler); for any other
  // status the first kMaxErrorBody bytes, so the caller can show the server's error.
  std::string body;
  Url url;            // the URL that answered, after redirects
  int redirects = 0;  // how many were followed
};

// Where Stream() delivers a 2xx response's body.
struct BodyHandler {
  // Called once with the status and headers before any body byte (check Content-Length or
  // Content-Range here). Optional. An error aborts the transfer and is returned.
  std::function<absl::Status(const Response& head)> on_head;
  // Called with each piece of the body in order. An error aborts the transfer and is returned.
  std::function<absl::Status(const char* data, size_t n)> on_data;
};

inline constexpr size_t kMaxErrorBody = 64 << 10;

// An HTTP/1.1 client. Calls block the calling thread (never call them from an event loop)
// and may run concurrently. Any status the server sends, 4xx and 5xx included, is a
// Response; errors are for exchanges that did not complete, with codes chosen by what the
// caller should do: Unavailable (connection refused or reset, timeout, truncated body:
// retry), FailedPrecondition (TLS verification or handshake failure, unsafe redirect: fix
// configuration), InvalidArgument (bad URL or header), ResourceExhausted (body over the
// limit). Map a Response's status with StatusOf() in common/http/status.h.
class HttpClient {
 public:
  virtual ~HttpClient() = default;

  // Sends `request` and buffers the final response's body, up to request.max_body_bytes.
  [[nodiscard]] virtual absl::StatusOr<Response> Fetch(const Request& request) = 0;

  // Sends `request` and hands a 2xx body to `handler` as it arrives, so the caller can hash
  // and decompress while downloading.
  [[nodiscard]] virtual absl::StatusOr<Response> Stream(const Request& request,
                                                        const BodyHandler& handler) = 0;
};

}  // namespace kmodd::http

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>

#include "absl/strings/str_cat.h"
#include "common/http/beast_internal.h"

namespace kmodd::http {

std::string UrlForMessage(const Url& url) {
  Url shown = url;
  shown.target = shown.target.substr(0, shown.target.find('?'));
  return shown.ToString();
}

absl::Status TransportStatus(const boost::beast::error_code& ec, std::string_view phase,
                             const Url& url, std::string_view timeout_text) {
  namespace bhttp = boost::beast::http;
  const std::string where = absl::StrCat(UrlForMessage(url), " (", std::string(phase), "): ");
  if (ec == boost::beast::error::timeout) {
    return absl::UnavailableError(absl::StrCat(where, "timed out: ", std::string(timeout_text)));
  }
  if (ec == bhttp::error::header_limit) {
    return absl::ResourceExhaustedError(absl::StrCat(where, "response headers too large"));
  }
  if (ec == boost::asio::ssl::error::stream_truncated || ec == bhttp::error::partial_message ||
      ec == bhttp::error::end_of_stream || ec == boost::asio::error::eof) {
    return absl::UnavailableError(absl::StrCat(where, "connection closed early: ", ec.message()));
  }
  // Refused, reset, unreachable, name not resolved, a malformed response: all of these may
  // be gone on the next try, and the caller owns the retry policy.
  return absl::UnavailableError(absl::StrCat(where, ec.message()));
}

}  // namespace kmodd::http

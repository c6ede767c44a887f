#pragma once
// Pieces of BeastHttpClient that speak Boost and OpenSSL. Only common/http/*.cc include this.

#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/error.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/http/beast_client.h"

namespace kmodd::http {

struct BeastHttpClient::Tls {
  Tls() : ctx(boost::asio::ssl::context::tls_client) {}
  boost::asio::ssl::context ctx;
  bool verify = true;
};

// The shared OpenSSL context: TLS 1.2 or later, the trust store `options` asks for.
// InvalidArgument when a CA bundle cannot be loaded. Never throws.
[[nodiscard]] absl::StatusOr<std::unique_ptr<BeastHttpClient::Tls>> MakeTls(
    const TlsOptions& options);

// Per connection: SNI for names, and the name or IP address the certificate must match.
[[nodiscard]] absl::Status PrepareTls(SSL* ssl, const Url& url, bool verify);

// A failed handshake as a Status: verification failures name the server and OpenSSL's
// verify error (FailedPrecondition); other TLS failures are FailedPrecondition too (a plain
// HTTP server, no common protocol); lost connections are Unavailable.
absl::Status HandshakeStatus(const boost::beast::error_code& ec, SSL* ssl, bool verify,
                             const Url& url, std::string_view timeout_text);

// A failed connect, write or read as a Status: Unavailable for what a retry may fix,
// ResourceExhausted for headers over the limit. `phase` says what was being done.
absl::Status TransportStatus(const boost::beast::error_code& ec, std::string_view phase,
                             const Url& url, std::string_view timeout_text);

// The URL for messages: without the query, which may hold signed credentials.
std::string UrlForMessage(const Url& url);

}  // namespace kmodd::http

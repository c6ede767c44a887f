#include <openssl/err.h>
#include <openssl/x509_vfy.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/error.hpp>
#include <exception>

#include "absl/strings/str_cat.h"
#include "common/http/beast_internal.h"

namespace kmodd::http {
namespace ssl = boost::asio::ssl;

absl::StatusOr<std::unique_ptr<BeastHttpClient::Tls>> MakeTls(const TlsOptions& options) {
  std::unique_ptr<BeastHttpClient::Tls> tls;
  try {
    tls = std::make_unique<BeastHttpClient::Tls>();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot create a TLS context: ", e.what()));
  }
  SSL_CTX_set_min_proto_version(tls->ctx.native_handle(), TLS1_2_VERSION);
  tls->verify = !options.insecure_skip_verify;
  boost::system::error_code ec;
  tls->ctx.set_verify_mode(tls->verify ? ssl::verify_peer : ssl::verify_none, ec);
  if (options.use_system_cas) {
    // A system without a CA store still works with an explicit bundle; the handshake
    // reports any certificate it then cannot verify.
    tls->ctx.set_default_verify_paths(ec);
  }
  if (!options.ca_file.empty()) {
    tls->ctx.load_verify_file(options.ca_file, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot load CA bundle ", options.ca_file, ": ", ec.message()));
    }
  }
  if (!options.ca_pem.empty()) {
    tls->ctx.add_certificate_authority(boost::asio::buffer(options.ca_pem), ec);
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat("cannot load CA data: ", ec.message()));
    }
  }
  if (options.client_cert_pem.empty() != options.client_key_pem.empty()) {
    return absl::InvalidArgumentError("a client certificate needs both a certificate and a key");
  }
  if (!options.client_cert_pem.empty()) {
    tls->ctx.use_certificate_chain(boost::asio::buffer(options.client_cert_pem), ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot load client certificate: ", ec.message()));
    }
    tls->ctx.use_private_key(boost::asio::buffer(options.client_key_pem), ssl::context::pem, ec);
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat("cannot load client key: ", ec.message()));
    }
    if (SSL_CTX_check_private_key(tls->ctx.native_handle()) != 1) {
      return absl::InvalidArgumentError("client key does not match the client certificate");
    }
  }
  return tls;
}

absl::Status PrepareTls(SSL* ssl, const Url& url, bool verify) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(url.host, ec);
  const bool is_ip = !ec;
  // RFC 6066: SNI carries names only, never address literals.
  if (!is_ip && SSL_set_tlsext_host_name(ssl, url.host.c_str()) != 1) {
    return absl::InternalError(absl::StrCat("cannot set TLS server name ", url.host));
  }
  if (!verify) {
    return absl::OkStatus();
  }
  // Checked by OpenSSL while it verifies the chain, so a mismatch is reported with the
  // verify result like any other verification failure.
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  const int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, url.host.c_str())
                       : X509_VERIFY_PARAM_set1_host(param, url.host.c_str(), 0);
  if (ok != 1) {
    return absl::InternalError(absl::StrCat("cannot set TLS peer name ", url.host));
  }
  return absl::OkStatus();
}

absl::Status HandshakeStatus(const boost::beast::error_code& ec, SSL* ssl, bool verify,
                             const Url& url, std::string_view timeout_text) {
  // OpenSSL records a verify result even when told not to verify: only report it when it
  // is what stopped the handshake.
  const long result = verify ? SSL_get_verify_result(ssl) : X509_V_OK;
  if (result != X509_V_OK) {
    return absl::FailedPreconditionError(
        absl::StrCat("TLS certificate of ", url.Authority(),
                     " failed verification: ", X509_verify_cert_error_string(result),
                     " (is its CA in the system store or the configured CA bundle?)"));
  }
  if (ec.category() == boost::asio::error::get_ssl_category()) {
    const bool plain_http =
        ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == SSL_R_WRONG_VERSION_NUMBER;
    return absl::FailedPreconditionError(
        absl::StrCat("TLS handshake with ", url.Authority(), " failed: ", ec.message(),
                     plain_http ? " (is it serving plain HTTP?)" : ""));
  }
  return TransportStatus(ec, "TLS handshake", url, timeout_text);
}

}  // namespace kmodd::http

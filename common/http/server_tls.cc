#include "common/http/server_tls.h"

#include <openssl/ssl.h>

#include <exception>

#include "absl/strings/str_cat.h"
#include "common/http/server_session.h"

namespace kmodd::http {

absl::StatusOr<std::shared_ptr<TlsServerContext>> MakeTlsServerContext(
    const std::string& cert_pem, const std::string& key_pem) {
  namespace asio = boost::asio;
  namespace ssl = asio::ssl;
  try {
    auto tls = std::make_shared<TlsServerContext>();
    ssl::context& ctx = tls->context;
    SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
    ctx.set_options(ssl::context::default_workarounds | ssl::context::no_compression |
                    ssl::context::single_dh_use);
    ctx.use_certificate_chain(asio::buffer(cert_pem));
    ctx.use_private_key(asio::buffer(key_pem), ssl::context::pem);
    if (SSL_CTX_check_private_key(ctx.native_handle()) != 1) {
      return absl::InvalidArgumentError("the serving key does not match its certificate");
    }
    return tls;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load the serving certificate and key: ", e.what()));
  }
}

}  // namespace kmodd::http

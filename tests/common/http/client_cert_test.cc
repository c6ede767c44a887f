#include <catch2/catch.hpp>

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <string>
#include <thread>
#include <utility>

#include "common/http/beast_client.h"
#include "tests/common/http/test_pki.h"
#include "tests/common/http/test_server.h"

namespace kmodd::http {
namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;

struct ClientCert {
  std::string cert_pem;
  std::string key_pem;
};

// A client certificate (clientAuth) signed by its own CA, whose PEM goes to the server.
ClientCert MakeClientCert(std::string& ca_pem) {
  const testing::TestCa ca("kmodd client CA");
  auto [cert, key] = ca.Issue("system:node:n1", "", "clientAuth");
  ca_pem = ca.Pem();
  return {std::move(cert), std::move(key)};
}

// Serves one TLS connection that requires a client certificate from `client_ca_pem`, and
// answers with the certificate's subject CN (or closes when the handshake fails).
class MutualTlsServer {
 public:
  MutualTlsServer(const testing::Pki& pki, const std::string& client_ca_pem)
      : acceptor_(ioc_, {asio::ip::make_address("127.0.0.1"), 0}),
        ctx_(asio::ssl::context::tls_server) {
    ctx_.use_certificate_chain(asio::buffer(pki.cert_pem));
    ctx_.use_private_key(asio::buffer(pki.key_pem), asio::ssl::context::pem);
    ctx_.add_certificate_authority(asio::buffer(client_ca_pem));
    ctx_.set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
    thread_ = std::thread([this] { ServeOne(); });
  }
  ~MutualTlsServer() { thread_.join(); }

  std::string Url() const {
    return "https://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()) + "/";
  }

 private:
  void ServeOne() {
    asio::ip::tcp::socket socket(ioc_);
    boost::system::error_code ec;
    acceptor_.accept(socket, ec);
    if (ec) {
      return;
    }
    asio::ssl::stream<asio::ip::tcp::socket&> stream(socket, ctx_);
    stream.handshake(asio::ssl::stream_base::server, ec);
    if (ec) {
      return;
    }
    boost::beast::flat_buffer buffer;
    bhttp::request<bhttp::string_body> req;
    bhttp::read(stream, buffer, req, ec);
    X509* peer = SSL_get_peer_certificate(stream.native_handle());
    char cn[256] = "";
    if (peer != nullptr) {
      X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof cn);
      X509_free(peer);
    }
    asio::write(stream, asio::buffer(testing::RawResponse(200, cn)), ec);
    stream.shutdown(ec);
  }

  asio::io_context ioc_;
  asio::ip::tcp::acceptor acceptor_;
  asio::ssl::context ctx_;
  std::thread thread_;
};

TEST_CASE("A client certificate is presented to a server that asks for one") {
  const testing::Pki pki = testing::MakePki("IP:127.0.0.1");
  std::string client_ca;
  const ClientCert client_cert = MakeClientCert(client_ca);
  MutualTlsServer server(pki, client_ca);
  ClientOptions options;
  options.tls.ca_pem = pki.ca_pem;
  options.tls.client_cert_pem = client_cert.cert_pem;
  options.tls.client_key_pem = client_cert.key_pem;
  auto client = BeastHttpClient::Create(options);
  REQUIRE(client.ok());
  Request request;
  request.url = server.Url();
  auto response = (*client)->Fetch(request);
  REQUIRE(response.status().ToString() == "OK");
  CHECK(response->status == 200);
  CHECK(response->body == "system:node:n1");
}

TEST_CASE("Without a client certificate a server that requires one refuses the handshake") {
  const testing::Pki pki = testing::MakePki("IP:127.0.0.1");
  std::string client_ca;
  (void)MakeClientCert(client_ca);
  MutualTlsServer server(pki, client_ca);
  ClientOptions options;
  options.tls.ca_pem = pki.ca_pem;
  auto client = BeastHttpClient::Create(options);
  REQUIRE(client.ok());
  Request request;
  request.url = server.Url();
  CHECK_FALSE((*client)->Fetch(request).ok());
}

TEST_CASE("A client certificate without its key, or with a broken key, is refused at Create") {
  std::string client_ca;
  const ClientCert client_cert = MakeClientCert(client_ca);
  ClientOptions options;
  options.tls.client_cert_pem = client_cert.cert_pem;
  auto half = BeastHttpClient::Create(options);
  CHECK(half.status().code() == absl::StatusCode::kInvalidArgument);

  options.tls.client_key_pem = "not a key";
  auto broken = BeastHttpClient::Create(options);
  CHECK(broken.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(broken.status().message()),
             Catch::Contains("client key"));

  std::string other_ca;
  options.tls.client_key_pem = MakeClientCert(other_ca).key_pem;
  auto mismatched = BeastHttpClient::Create(options);
  CHECK(mismatched.status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kmodd::http

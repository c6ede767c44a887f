// controller/certs/pki on its own: what each kind of certificate may be used for. (The
// certificate manager, and the serving certificate's names: certs_test.cc.)

#include <catch2/catch.hpp>

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "controller/certs/pki.h"

namespace kmodd::certs {
namespace {

constexpr absl::Time kNow = absl::FromUnixSeconds(1800000000);

struct Purposes {
  bool server = false;
  bool client = false;
  std::string cn;
};

// What OpenSSL would let `pem` serve as, and its subject CN. (The product never asks this,
// so it stays here rather than in ReadCert.)
Purposes PurposesOf(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  REQUIRE(bio != nullptr);
  std::unique_ptr<X509, decltype(&X509_free)> cert(
      PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), &X509_free);
  REQUIRE(cert != nullptr);
  Purposes p;
  p.server = X509_check_purpose(cert.get(), X509_PURPOSE_SSL_SERVER, 0) == 1;
  p.client = X509_check_purpose(cert.get(), X509_PURPOSE_SSL_CLIENT, 0) == 1;
  char cn[256] = "";
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert.get()), NID_commonName, cn, sizeof cn);
  p.cn = cn;
  return p;
}

TEST_CASE("pki issues a client certificate for its CN and names, signed by the CA, for clients") {
  const auto ca = MakeCa("kmodd-ca", kNow, absl::Hours(24));
  REQUIRE(ca.ok());
  const auto client = IssueClient(*ca, "system:node:n1", ServingNames{{"n1"}, {"10.0.0.1"}}, kNow,
                                  absl::Hours(1));
  REQUIRE(client.ok());
  CHECK(Matches(*client, ca->cert_pem));
  const auto info = ReadCert(client->cert_pem);
  REQUIRE(info.ok());
  CHECK(info->dns == std::vector<std::string>{"n1"});
  CHECK(info->ips == std::vector<std::string>{"10.0.0.1"});
  CHECK(info->not_after == kNow + absl::Hours(1));
  const Purposes p = PurposesOf(client->cert_pem);
  CHECK(p.cn == "system:node:n1");
  CHECK(p.client);
  CHECK_FALSE(p.server);
}

TEST_CASE("pki issues a client certificate without any subject alternative name") {
  const auto ca = MakeCa("kmodd-ca", kNow, absl::Hours(24));
  REQUIRE(ca.ok());
  const auto client = IssueClient(*ca, "w1", ServingNames{}, kNow, absl::Hours(1));
  REQUIRE(client.ok());
  const auto info = ReadCert(client->cert_pem);
  REQUIRE(info.ok());
  CHECK(info->dns.empty());
  CHECK(info->ips.empty());
  CHECK(PurposesOf(client->cert_pem).cn == "w1");
}

TEST_CASE("a serving certificate is for servers only, and a broken CA issues nothing") {
  const auto ca = MakeCa("kmodd-ca", kNow, absl::Hours(24));
  REQUIRE(ca.ok());
  const auto serving = IssueServing(*ca, "kmodd-controller", ServingNames{{}, {"127.0.0.1"}}, kNow,
                                    absl::Hours(1));
  REQUIRE(serving.ok());
  const Purposes p = PurposesOf(serving->cert_pem);
  CHECK(p.server);
  CHECK_FALSE(p.client);
  const KeyPair broken{ca->cert_pem, "not a key"};
  CHECK(IssueClient(broken, "w1", {}, kNow, absl::Hours(1)).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(IssueServing(broken, "w1", {}, kNow, absl::Hours(1)).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kmodd::certs

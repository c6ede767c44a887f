#pragma once
// A throwaway CA and a server certificate it signs, made with OpenSSL's C API so the TLS
// tests need no tool on the machine. Header-only (the unit binary compiles *_test.cc only).

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kmodd::http::testing {

struct Pki {
  std::string ca_pem;
  std::string cert_pem;  // the server certificate
  std::string key_pem;   // its key
};

namespace pki_detail {

template <class T, void (*F)(T*)>
struct Free {
  void operator()(T* p) const { F(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Free<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Free<X509, X509_free>>;
using Bio = std::unique_ptr<BIO, Free<BIO, BIO_free_all>>;

inline void Check(bool ok, const char* what) {
  if (!ok) {
    throw std::runtime_error(std::string("test PKI: ") + what + " failed");
  }
}

inline Key NewKey() {
  Key key(EVP_EC_gen("P-256"));
  Check(key != nullptr, "EVP_EC_gen");
  return key;
}

inline void AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  Check(ext != nullptr, "X509V3_EXT_conf_nid");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// Signed by `issuer_key`; self-signed when `issuer` is null.
inline Cert NewCert(const std::string& cn, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key,
                    const std::vector<std::pair<int, std::string>>& extensions, long serial) {
  Cert cert(X509_new());
  Check(cert != nullptr, "X509_new");
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* signer = issuer ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  X509_set_pubkey(cert.get(), key);
  for (const auto& [nid, value] : extensions) {
    AddExt(cert.get(), signer, nid, value);
  }
  Check(X509_sign(cert.get(), issuer_key, EVP_sha256()) > 0, "X509_sign");
  return cert;
}

inline std::string Pem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  Check(PEM_write_bio_X509(bio.get(), cert) == 1, "PEM_write_bio_X509");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

inline std::string Pem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  Check(PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1,
        "PEM_write_bio_PrivateKey");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

}  // namespace pki_detail

// A throwaway CA that issues leaf certificates: servers and clients of mutual TLS.
class TestCa {
 public:
  TestCa()
      : key_(pki_detail::NewKey()),
        cert_(pki_detail::NewCert("kmodd test CA", key_.get(), nullptr, key_.get(),
                                  {{NID_basic_constraints, "critical,CA:TRUE"},
                                   {NID_key_usage, "critical,keyCertSign,cRLSign"},
                                   {NID_subject_key_identifier, "hash"}},
                                  1)) {}

  // {certificate, key} PEM for `cn`, with subjectAltName `san` ("" = none) and extended
  // key usage `usage` ("serverAuth", "clientAuth").
  std::pair<std::string, std::string> Issue(const std::string& cn, const std::string& san,
                                            const char* usage) {
    pki_detail::Key key = pki_detail::NewKey();
    std::vector<std::pair<int, std::string>> ext = {{NID_basic_constraints, "critical,CA:FALSE"},
                                                    {NID_key_usage, "critical,digitalSignature"},
                                                    {NID_ext_key_usage, usage},
                                                    {NID_authority_key_identifier, "keyid"}};
    if (!san.empty()) {
      ext.emplace_back(NID_subject_alt_name, san);
    }
    pki_detail::Cert cert =
        pki_detail::NewCert(cn, key.get(), cert_.get(), key_.get(), ext, serial_++);
    return {pki_detail::Pem(cert.get()), pki_detail::Pem(key.get())};
  }
  std::string Pem() const { return pki_detail::Pem(cert_.get()); }

 private:
  pki_detail::Key key_;
  pki_detail::Cert cert_;
  long serial_ = 2;
};

// A CA, and a server certificate it signs whose subjectAltName is `san`
// (e.g. "IP:127.0.0.1,DNS:localhost").
inline Pki MakePki(const std::string& san) {
  using namespace pki_detail;  // NOLINT(google-build-using-namespace): test helper
  Key ca_key = NewKey();
  Cert ca = NewCert("kmodd test CA", ca_key.get(), nullptr, ca_key.get(),
                    {{NID_basic_constraints, "critical,CA:TRUE"},
                     {NID_key_usage, "critical,keyCertSign,cRLSign"},
                     {NID_subject_key_identifier, "hash"}},
                    1);
  Key key = NewKey();
  Cert cert = NewCert("kmodd test server", key.get(), ca.get(), ca_key.get(),
                      {{NID_basic_constraints, "critical,CA:FALSE"},
                       {NID_key_usage, "critical,digitalSignature"},
                       {NID_ext_key_usage, "serverAuth"},
                       {NID_subject_alt_name, san},
                       {NID_authority_key_identifier, "keyid"}},
                      2);
  return Pki{Pem(ca.get()), Pem(cert.get()), Pem(key.get())};
}

}  // namespace kmodd::http::testing

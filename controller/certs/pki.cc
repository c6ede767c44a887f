#include "controller/certs/pki.h"

#include <arpa/inet.h>
#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace kmodd::certs {

namespace {

template <typename T, void (*F)(T*)>
struct Deleter {
  void operator()(T* p) const { F(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using Names = std::unique_ptr<GENERAL_NAMES, Deleter<GENERAL_NAMES, GENERAL_NAMES_free>>;

absl::Status Ssl(const char* what) {
  return absl::InternalError(absl::StrCat("OpenSSL: ", what, " failed"));
}

Pkey NewP256Key() {
  EVP_PKEY* k = EVP_EC_gen("P-256");
  return Pkey(k);
}

std::string ToPem(EVP_PKEY* key) {
  Bio b(BIO_new(BIO_s_mem()));
  if (!b || PEM_write_bio_PrivateKey(b.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return "";
  }
  char* data = nullptr;
  const long n = BIO_get_mem_data(b.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string ToPem(X509* cert) {
  Bio b(BIO_new(BIO_s_mem()));
  if (!b || PEM_write_bio_X509(b.get(), cert) != 1) {
    return "";
  }
  char* data = nullptr;
  const long n = BIO_get_mem_data(b.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

Cert ParseCert(const std::string& pem) {
  Bio b(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Cert(b ? PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr) : nullptr);
}

Pkey ParseKey(const std::string& pem) {
  Bio b(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Pkey(b ? PEM_read_bio_PrivateKey(b.get(), nullptr, nullptr, nullptr) : nullptr);
}

bool AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) {
    return false;
  }
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A certificate with a random serial, `cn` as subject, valid [now - 1 h, now + validity].
absl::StatusOr<Cert> NewCert(EVP_PKEY* key, const std::string& cn, absl::Time now,
                             absl::Duration validity) {
  Cert cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) {
    return Ssl("X509_new");
  }
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) {
    return Ssl("RAND_bytes");
  }
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  const bool serial_ok =
      bn != nullptr && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get())) != nullptr;
  BN_free(bn);
  if (!serial_ok) {
    return Ssl("serial number");
  }
  time_t from = absl::ToTimeT(now - absl::Hours(1));
  time_t to = absl::ToTimeT(now + validity);
  if (X509_time_adj_ex(X509_getm_notBefore(cert.get()), 0, 0, &from) == nullptr ||
      X509_time_adj_ex(X509_getm_notAfter(cert.get()), 0, 0, &to) == nullptr) {
    return Ssl("validity");
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1 ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return Ssl("subject");
  }
  return cert;
}

// What a leaf certificate is for: its extended key usage, and its name in errors.
struct Usage {
  const char* eku;
  const char* name;
};
constexpr Usage kServing{"serverAuth", "serving"};
constexpr Usage kClient{"clientAuth", "client"};

// A leaf certificate for `names`, signed by `ca`.
absl::StatusOr<KeyPair> IssueLeaf(const KeyPair& ca, const std::string& common_name,
                                  const ServingNames& names, Usage usage, absl::Time now,
                                  absl::Duration validity) {
  Cert ca_cert = ParseCert(ca.cert_pem);
  Pkey ca_key = ParseKey(ca.key_pem);
  if (!ca_cert || !ca_key) {
    return absl::InvalidArgumentError("the CA certificate or key does not parse");
  }
  Pkey key = NewP256Key();
  if (!key) {
    return Ssl("P-256 key generation");
  }
  absl::StatusOr<Cert> cert = NewCert(key.get(), common_name, now, validity);
  if (!cert.ok()) {
    return cert.status();
  }
  std::string san;
  for (const auto& d : names.dns) {
    absl::StrAppend(&san, san.empty() ? "" : ",", "DNS:", d);
  }
  for (const auto& ip : names.ips) {
    absl::StrAppend(&san, san.empty() ? "" : ",", "IP:", ip);
  }
  X509* c = cert->get();
  if (X509_set_issuer_name(c, X509_get_subject_name(ca_cert.get())) != 1 ||
      !AddExt(c, ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE") ||
      !AddExt(c, ca_cert.get(), NID_key_usage, "critical,digitalSignature") ||
      !AddExt(c, ca_cert.get(), NID_ext_key_usage, usage.eku) ||
      !AddExt(c, ca_cert.get(), NID_authority_key_identifier, "keyid:always") ||
      (!san.empty() && !AddExt(c, ca_cert.get(), NID_subject_alt_name, san.c_str())) ||
      X509_sign(c, ca_key.get(), EVP_sha256()) == 0) {
    return absl::InternalError(absl::StrCat("OpenSSL: signing the ", usage.name,
                                            " certificate (are the extra names valid?) failed"));
  }
  return KeyPair{ToPem(c), ToPem(key.get())};
}

}  // namespace

absl::StatusOr<KeyPair> MakeCa(const std::string& common_name, absl::Time now,
                               absl::Duration validity) {
  Pkey key = NewP256Key();
  if (!key) {
    return Ssl("P-256 key generation");
  }
  absl::StatusOr<Cert> cert = NewCert(key.get(), common_name, now, validity);
  if (!cert.ok()) {
    return cert.status();
  }
  X509* c = cert->get();
  if (X509_set_issuer_name(c, X509_get_subject_name(c)) != 1 ||
      !AddExt(c, c, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
      !AddExt(c, c, NID_key_usage, "critical,keyCertSign,cRLSign") ||
      !AddExt(c, c, NID_subject_key_identifier, "hash") ||
      X509_sign(c, key.get(), EVP_sha256()) == 0) {
    return Ssl("signing the CA");
  }
  return KeyPair{ToPem(c), ToPem(key.get())};
}

absl::StatusOr<KeyPair> IssueServing(const KeyPair& ca, const std::string& common_name,
                                     const ServingNames& names, absl::Time now,
                                     absl::Duration validity) {
  return IssueLeaf(ca, common_name, names, kServing, now, validity);
}

absl::StatusOr<KeyPair> IssueClient(const KeyPair& ca, const std::string& common_name,
                                    const ServingNames& names, absl::Time now,
                                    absl::Duration validity) {
  return IssueLeaf(ca, common_name, names, kClient, now, validity);
}

absl::StatusOr<CertInfo> ReadCert(const std::string& pem) {
  Cert cert = ParseCert(pem);
  if (!cert) {
    return absl::InvalidArgumentError("not a PEM certificate");
  }
  CertInfo info;
  struct tm t {};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert.get()), &t) != 1) {
    return absl::InvalidArgumentError("the certificate's notAfter does not parse");
  }
  info.not_after = absl::FromTimeT(timegm(&t));
  t = {};
  if (ASN1_TIME_to_tm(X509_get0_notBefore(cert.get()), &t) != 1) {
    return absl::InvalidArgumentError("the certificate's notBefore does not parse");
  }
  info.not_before = absl::FromTimeT(timegm(&t));
  Names sans(static_cast<GENERAL_NAMES*>(
      X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; sans && i < sk_GENERAL_NAME_num(sans.get()); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(sans.get(), i);
    if (n->type == GEN_DNS) {
      const ASN1_IA5STRING* s = n->d.dNSName;
      info.dns.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                            static_cast<size_t>(ASN1_STRING_length(s)));
    } else if (n->type == GEN_IPADD) {
      const int len = ASN1_STRING_length(n->d.iPAddress);
      char text[INET6_ADDRSTRLEN] = {};
      if ((len == 4 || len == 16) &&
          inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(n->d.iPAddress), text,
                    sizeof text) != nullptr) {
        info.ips.emplace_back(text);
      }
    }
  }
  return info;
}

bool Matches(const KeyPair& pair, const std::string& ca_pem) {
  Cert cert = ParseCert(pair.cert_pem);
  Cert ca = ParseCert(ca_pem);
  Pkey key = ParseKey(pair.key_pem);
  if (!cert || !ca || !key) {
    return false;
  }
  Pkey ca_pub(X509_get_pubkey(ca.get()));
  return ca_pub && X509_verify(cert.get(), ca_pub.get()) == 1 &&
         X509_check_private_key(cert.get(), key.get()) == 1;
}

}  // namespace kmodd::certs

#include "controller/sign/module_signer.h"

#include <openssl/bio.h>
#include <openssl/cms.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <array>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace kmodd::sign {

namespace {

constexpr size_t kTrailer = 12;  // struct module_signature
constexpr uint8_t kPkeyIdPkcs7 = 2;

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct CmsFree {
  void operator()(CMS_ContentInfo* c) const { CMS_ContentInfo_free(c); }
};
using Bio = std::unique_ptr<BIO, BioFree>;

// The last OpenSSL error as text, and the queue cleared.
std::string OpensslError() {
  const unsigned long e = ERR_peek_last_error();
  std::string out = "unknown error";
  if (e != 0) {
    std::array<char, 256> buf{};
    ERR_error_string_n(e, buf.data(), buf.size());
    out = buf.data();
  }
  ERR_clear_error();
  return out;
}

Bio MemoryOf(std::string_view text) {
  return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

bool LooksPem(std::string_view text) { return text.find("-----BEGIN ") != std::string_view::npos; }

// OpenSSL's default passphrase callback reads the terminal: a daemon would hang on an
// encrypted key. This one gives no passphrase, so such a key is refused at once.
int NoPassphrase(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*u*/) { return -1; }

}  // namespace

struct SigningKey::State {
  std::unique_ptr<EVP_PKEY, PkeyFree> key;
  std::unique_ptr<X509, X509Free> cert;
  const EVP_MD* md = nullptr;
};

SigningKey::SigningKey(std::unique_ptr<State> s) : state_(std::move(s)) {}
SigningKey::~SigningKey() = default;
SigningKey::SigningKey(SigningKey&&) noexcept = default;
SigningKey& SigningKey::operator=(SigningKey&&) noexcept = default;

absl::StatusOr<SigningKey> SigningKey::Load(std::string_view key, std::string_view cert,
                                            std::string_view hash) {
  if (key.size() > (1 << 20) || cert.size() > (1 << 20)) {
    return absl::InvalidArgumentError("the signing key or certificate is larger than 1 MiB");
  }
  auto s = std::make_unique<State>();
  const std::string md_name(hash);
  if (hash != "sha256" && hash != "sha384" && hash != "sha512" && hash != "sha224" &&
      hash != "sha1") {
    return absl::InvalidArgumentError(absl::StrCat(
        "hash algorithm \"", md_name, "\" is not one the kernel verifies: use sha256 (default), "
        "sha384, sha512, sha224 or sha1"));
  }
  s->md = EVP_get_digestbyname(md_name.c_str());
  if (s->md == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("hash algorithm ", md_name, ": ", OpensslError()));
  }
  Bio kb = MemoryOf(key);
  s->key.reset(LooksPem(key) ? PEM_read_bio_PrivateKey(kb.get(), nullptr, NoPassphrase, nullptr)
                             : d2i_PrivateKey_bio(kb.get(), nullptr));
  if (!s->key) {
    return absl::InvalidArgumentError(
        absl::StrCat("the signing key is not an unencrypted PEM or DER private key (decrypt it first: "
                     "openssl pkey -in KEY -out PLAIN): ", OpensslError()));
  }
  Bio cb = MemoryOf(cert);
  s->cert.reset(LooksPem(cert) ? PEM_read_bio_X509(cb.get(), nullptr, NoPassphrase, nullptr)
                               : d2i_X509_bio(cb.get(), nullptr));
  if (!s->cert) {
    return absl::InvalidArgumentError(
        absl::StrCat("the signing certificate is not a PEM or DER X.509 certificate: ", OpensslError()));
  }
  if (X509_check_private_key(s->cert.get(), s->key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        "the signing key does not match the certificate's public key: give the key the "
        "certificate was made for");
  }
  return SigningKey(std::move(s));
}

std::string SigningKey::Signer() const {
  X509_NAME* name = X509_get_subject_name(state_->cert.get());
  const int i = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (i >= 0) {
    ASN1_STRING* cn = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i));
    unsigned char* utf8 = nullptr;
    const int n = ASN1_STRING_to_UTF8(&utf8, cn);
    if (n >= 0) {
      std::string out(reinterpret_cast<char*>(utf8), static_cast<size_t>(n));
      OPENSSL_free(utf8);
      return out;
    }
  }
  std::array<char, 512> buf{};
  X509_NAME_oneline(name, buf.data(), static_cast<int>(buf.size()));
  return buf.data();
}

bool IsSigned(std::string_view module) { return module.ends_with(kModuleSignatureMagic); }

absl::StatusOr<std::string_view> StripSignature(std::string_view module) {
  if (!IsSigned(module)) {
    return module;
  }
  const size_t magic = kModuleSignatureMagic.size();
  if (module.size() < magic + kTrailer) {
    return absl::InvalidArgumentError("the module's signature trailer is cut short");
  }
  const auto* t = reinterpret_cast<const unsigned char*>(module.data() + module.size() - magic - kTrailer);
  const uint32_t sig_len = (uint32_t{t[8]} << 24) | (uint32_t{t[9]} << 16) | (uint32_t{t[10]} << 8) | t[11];
  if (t[2] != kPkeyIdPkcs7) {
    return absl::InvalidArgumentError("the module's signature is not PKCS#7 (id_type is not 2)");
  }
  if (sig_len > module.size() - magic - kTrailer) {
    return absl::InvalidArgumentError(
        absl::StrCat("the module's signature length (", sig_len, " bytes) is longer than the module"));
  }
  return module.substr(0, module.size() - magic - kTrailer - sig_len);
}

absl::StatusOr<std::string> SignModule(std::string_view module, const SigningKey& key) {
  absl::StatusOr<std::string_view> bare = StripSignature(module);
  if (!bare.ok()) {
    return bare.status();
  }
  const SigningKey::State& s = *key.state_;
  Bio content = MemoryOf(*bare);
  const unsigned int flags = CMS_NOCERTS | CMS_PARTIAL | CMS_BINARY | CMS_DETACHED | CMS_STREAM;
  std::unique_ptr<CMS_ContentInfo, CmsFree> cms(CMS_sign(nullptr, nullptr, nullptr, nullptr, flags));
  if (!cms) {
    return absl::InternalError(absl::StrCat("CMS_sign: ", OpensslError()));
  }
  if (CMS_add1_signer(cms.get(), s.cert.get(), s.key.get(), s.md,
                      CMS_NOCERTS | CMS_BINARY | CMS_NOSMIMECAP | CMS_NOATTR) == nullptr) {
    return absl::InternalError(absl::StrCat("adding the signer: ", OpensslError()));
  }
  if (CMS_final(cms.get(), content.get(), nullptr, CMS_NOCERTS | CMS_BINARY) != 1) {
    return absl::InternalError(absl::StrCat("signing: ", OpensslError()));
  }
  Bio der(BIO_new(BIO_s_mem()));
  if (i2d_CMS_bio(der.get(), cms.get()) != 1) {
    return absl::InternalError(absl::StrCat("encoding the signature: ", OpensslError()));
  }
  char* data = nullptr;
  const long n = BIO_get_mem_data(der.get(), &data);
  if (n <= 0 || static_cast<unsigned long>(n) > 0xffffffffUL) {
    return absl::InternalError("the encoded signature is empty or too long");
  }
  std::string out;
  out.reserve(bare->size() + static_cast<size_t>(n) + kTrailer + kModuleSignatureMagic.size());
  out.append(*bare);
  out.append(data, static_cast<size_t>(n));
  const auto len = static_cast<uint32_t>(n);
  const std::array<char, kTrailer> trailer = {0, 0, static_cast<char>(kPkeyIdPkcs7), 0, 0, 0, 0, 0,
                                              static_cast<char>(len >> 24), static_cast<char>(len >> 16),
                                              static_cast<char>(len >> 8), static_cast<char>(len)};
  out.append(trailer.data(), trailer.size());
  out.append(kModuleSignatureMagic);
  return out;
}

}  // namespace kmodd::sign

#include "common/oci/sha256.h"

#include <openssl/evp.h>

namespace kmodd::image {

struct Sha256::Ctx {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  ~Ctx() { EVP_MD_CTX_free(md); }
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) { EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr); }
Sha256::~Sha256() = default;

void Sha256::Update(const char* data, size_t n) { EVP_DigestUpdate(ctx_->md, data, n); }

std::string Sha256::Digest() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_->md, out, &len);
  static const char kHex[] = "0123456789abcdef";
  std::string s = "sha256:";
  for (unsigned int i = 0; i < len; ++i) {
    s.push_back(kHex[out[i] >> 4]);
    s.push_back(kHex[out[i] & 0xf]);
  }
  return s;
}

std::string Sha256::Of(std::string_view data) {
  Sha256 h;
  h.Update(data.data(), data.size());
  return h.Digest();
}

}  // namespace kmodd::image

#pragma once

// Streaming SHA-256 (OpenSSL), for verifying blobs while they download.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace kmodd::image {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const char* data, size_t n);
  // "sha256:<64 hex>"; the object is spent afterwards.
  std::string Digest();

  static std::string Of(std::string_view data);

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

}  // namespace kmodd::image

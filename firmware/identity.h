#pragma once

// What a firmware file's content is taken to be: its size and its FNV-1a 64 hash.
//
// This is an identity check, not a security boundary: it answers "is the file still what
// kmodd wrote?" and "did the source change under us?". FNV is not collision resistant, so
// wherever a wrong "same" would let one owner's bytes stand in for another's (a second owner
// claiming a staged path, a file kmodd did not write), the bytes themselves are compared.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace kmodd::firmware {

struct Identity {
  uint64_t size = 0;
  std::string digest;  // "fnv1a64:" and 16 lowercase hex digits

  bool operator==(const Identity&) const = default;
};

class ContentHasher {
 public:
  void Update(const char* data, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      hash_ ^= static_cast<unsigned char>(data[i]);
      hash_ *= kPrime;
    }
    size_ += n;
  }

  Identity Result() const {
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash_));
    return Identity{size_, std::string(kDigestPrefix) + hex};
  }

  static constexpr const char* kDigestPrefix = "fnv1a64:";

 private:
  static constexpr uint64_t kOffsetBasis = 0xcbf29ce484222325ULL;
  static constexpr uint64_t kPrime = 0x100000001b3ULL;

  uint64_t hash_ = kOffsetBasis;
  uint64_t size_ = 0;
};

}  // namespace kmodd::firmware

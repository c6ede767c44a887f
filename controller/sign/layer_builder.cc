#include "controller/sign/layer_builder.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/oci/sha256.h"

namespace kmodd::sign {

namespace {

constexpr size_t kBlock = 512;

void Octal(char* field, size_t width, uint64_t value) {
  // width - 1 digits, then NUL, as ustar writes them.
  snprintf(field, width, "%0*llo", static_cast<int>(width - 1), static_cast<unsigned long long>(value));
}

absl::Status AppendHeader(std::string& out, const std::string& path, char type, uint32_t mode, uint64_t size) {
  char h[kBlock];
  std::memset(h, 0, sizeof h);
  std::string name = path;
  std::string prefix;
  if (name.size() > 100) {
    // Split at a '/' so that the prefix is at most 155 bytes and the name at most 100.
    size_t cut = name.rfind('/', 155);
    while (cut != std::string::npos && name.size() - cut - 1 > 100) {
      cut = std::string::npos;  // the last part alone is too long
    }
    if (cut == std::string::npos || cut == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", path, "\": too long for a tar header (a part over 100 bytes, or over 255 in all)"));
    }
    prefix = name.substr(0, cut);
    name = name.substr(cut + 1);
  }
  std::copy_n(name.data(), name.size(), h);
  Octal(h + 100, 8, mode);
  Octal(h + 108, 8, 0);
  Octal(h + 116, 8, 0);
  Octal(h + 124, 12, size);
  Octal(h + 136, 12, 0);
  std::memset(h + 148, ' ', 8);
  h[156] = type;
  constexpr std::string_view kMagic("ustar\0" "00", 8);  // magic "ustar\0", version "00"
  std::copy_n(kMagic.data(), kMagic.size(), h + 257);
  std::copy_n(prefix.data(), prefix.size(), h + 345);
  unsigned sum = 0;
  for (unsigned char c : h) {
    sum += c;
  }
  snprintf(h + 148, 8, "%06o", sum);  // six digits, NUL, then the space already there
  out.append(h, sizeof h);
  return absl::OkStatus();
}

absl::StatusOr<std::string> Gzip(const std::string& in) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return absl::ResourceExhaustedError("gzip: deflateInit2 failed");
  }
  std::string out;
  out.resize(deflateBound(&z, in.size()) + 64);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) {
    return absl::InternalError(absl::StrCat("gzip: deflate returned ", rc));
  }
  return out;
}

}  // namespace

absl::StatusOr<BuiltLayer> BuildLayer(const std::vector<LayerFile>& files) {
  BuiltLayer layer;
  std::set<std::string> dirs;
  for (const LayerFile& f : files) {
    if (f.path.empty() || f.path.front() == '/' || f.path.back() == '/' ||
        f.path.find("//") != std::string::npos || ("/" + f.path + "/").find("/../") != std::string::npos ||
        ("/" + f.path + "/").find("/./") != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", f.path, "\": not a clean relative path for an image layer"));
    }
    for (size_t at = f.path.find('/'); at != std::string::npos; at = f.path.find('/', at + 1)) {
      const std::string dir = f.path.substr(0, at);
      if (dirs.insert(dir).second) {
        if (absl::Status s = AppendHeader(layer.tar, dir, '5', 0755, 0); !s.ok()) {
          return s;
        }
      }
    }
    if (absl::Status s = AppendHeader(layer.tar, f.path, '0', f.mode & 07777, f.data.size()); !s.ok()) {
      return s;
    }
    layer.tar += f.data;
    layer.tar.append((kBlock - f.data.size() % kBlock) % kBlock, '\0');
  }
  layer.tar.append(2 * kBlock, '\0');
  absl::StatusOr<std::string> gz = Gzip(layer.tar);
  if (!gz.ok()) {
    return gz.status();
  }
  layer.gzip = std::move(*gz);
  layer.diff_id = image::Sha256::Of(layer.tar);
  layer.digest = image::Sha256::Of(layer.gzip);
  return layer;
}

}  // namespace kmodd::sign

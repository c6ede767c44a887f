#include "common/oci/decompressor.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kmodd::image {
namespace {

// Uncompressed tar: bytes pass through, still cut to the same piece size so the consumer's
// per-piece checks behave the same for every format.
class PassThrough final : public Decompressor {
 public:
  absl::Status Feed(const char* data, size_t n, DecompressedSink out) override {
    while (n > 0) {
      const size_t piece = std::min(n, kDecompressorChunk);
      bytes_in_ += piece;
      if (absl::Status s = out(data, piece); !s.ok()) {
        return s;
      }
      data += piece;
      n -= piece;
    }
    return absl::OkStatus();
  }
  absl::Status Finish(DecompressedSink) override { return absl::OkStatus(); }
};

constexpr std::array<std::pair<std::string_view, Compression>, 9> kMediaTypes = {{
    {"application/vnd.oci.image.layer.v1.tar", Compression::kNone},
    {"application/vnd.oci.image.layer.v1.tar+gzip", Compression::kGzip},
    {"application/vnd.oci.image.layer.v1.tar+zstd", Compression::kZstd},
    {"application/vnd.oci.image.layer.nondistributable.v1.tar", Compression::kNone},
    {"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip", Compression::kGzip},
    {"application/vnd.oci.image.layer.nondistributable.v1.tar+zstd", Compression::kZstd},
    {"application/vnd.docker.image.rootfs.diff.tar.gzip", Compression::kGzip},
    {"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", Compression::kGzip},
    {"application/vnd.docker.image.rootfs.diff.tar", Compression::kNone},
}};

}  // namespace

std::string_view CompressionName(Compression c) {
  switch (c) {
    case Compression::kNone:
      return "none";
    case Compression::kGzip:
      return "gzip";
    case Compression::kZstd:
      return "zstd";
  }
  return "unknown";
}

absl::StatusOr<Compression> LayerCompression(std::string_view media_type) {
  for (const auto& [type, compression] : kMediaTypes) {
    if (media_type == type) {
      return compression;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unsupported layer media type \"", std::string(media_type), "\""));
}

std::unique_ptr<Decompressor> NewDecompressor(Compression c) {
  switch (c) {
    case Compression::kGzip:
      return NewGzipDecompressor();
    case Compression::kZstd:
      return NewZstdDecompressor();
    case Compression::kNone:
      break;
  }
  return std::make_unique<PassThrough>();
}

}  // namespace kmodd::image

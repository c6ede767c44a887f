#pragma once

// Streaming decompression of layer blobs, fed chunk by chunk as they arrive from the network:
// no layer is ever held whole in memory or written to disk compressed first.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kmodd::image {

enum class Compression { kNone, kGzip, kZstd };

std::string_view CompressionName(Compression c);

// The compression of a layer from its manifest media type:
//   application/vnd.oci.image.layer.v1.tar              none
//   application/vnd.oci.image.layer.v1.tar+gzip         gzip
//   application/vnd.oci.image.layer.v1.tar+zstd         zstd
//   application/vnd.docker.image.rootfs.diff.tar.gzip   gzip
// and the OCI "nondistributable" and Docker "foreign" variants of the same formats.
// InvalidArgument for anything else (the image is not something kmodd can apply).
[[nodiscard]] absl::StatusOr<Compression> LayerCompression(std::string_view media_type);

// Receives decompressed bytes. A non-OK status stops decompression at once and is returned
// by Feed/Finish: that is how a consumer stops a decompression bomb mid-chunk.
using DecompressedSink = absl::FunctionRef<absl::Status(const char* data, size_t n)>;

class Decompressor {
 public:
  virtual ~Decompressor() = default;

  // Decompresses `n` more input bytes, handing output to `out` in pieces of at most
  // kDecompressorChunk bytes. Errors name the format ("gzip: ...") but not the layer: the
  // caller adds that.
  [[nodiscard]] virtual absl::Status Feed(const char* data, size_t n, DecompressedSink out) = 0;
  // The input has ended: an error if it stopped inside a compressed stream (truncation).
  [[nodiscard]] virtual absl::Status Finish(DecompressedSink out) = 0;

  // Input bytes consumed so far. Exact, and already updated when `out` is called, so the
  // consumer can compute the compression ratio at every output piece.
  uint64_t bytes_in() const { return bytes_in_; }

 protected:
  uint64_t bytes_in_ = 0;
};

inline constexpr size_t kDecompressorChunk = size_t{128} * 1024;

[[nodiscard]] std::unique_ptr<Decompressor> NewDecompressor(Compression c);

// Backends, in their own files (zlib_decompressor.cc, zstd_decompressor.cc).
[[nodiscard]] std::unique_ptr<Decompressor> NewGzipDecompressor();
[[nodiscard]] std::unique_ptr<Decompressor> NewZstdDecompressor();

}  // namespace kmodd::image

// zstd through libzstd's streaming API. Concatenated frames (and skippable frames) are
// handled by libzstd itself; the input must end exactly at the end of a frame.

#include <zstd.h>

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/oci/decompressor.h"

namespace kmodd::image {
namespace {

// Frames asking for a larger window are refused rather than allowed to allocate it: 2^27
// (128 MiB) is libzstd's own default limit and what `zstd --long` writes at most.
constexpr int kMaxWindowLog = 27;

class ZstdDecompressor final : public Decompressor {
 public:
  ZstdDecompressor() : ctx_(ZSTD_createDCtx()), out_(kDecompressorChunk) {
    if (ctx_ != nullptr) {
      ZSTD_DCtx_setParameter(ctx_, ZSTD_d_windowLogMax, kMaxWindowLog);
    }
  }
  ~ZstdDecompressor() override { ZSTD_freeDCtx(ctx_); }
  ZstdDecompressor(const ZstdDecompressor&) = delete;
  ZstdDecompressor& operator=(const ZstdDecompressor&) = delete;

  absl::Status Feed(const char* data, size_t n, DecompressedSink out) override {
    if (!error_.ok()) {
      return error_;
    }
    if (ctx_ == nullptr) {
      return error_ = absl::ResourceExhaustedError("zstd: cannot allocate a decompression context");
    }
    ZSTD_inBuffer in{data, n, 0};
    bool output_pending = false;
    while (in.pos < in.size || output_pending) {
      ZSTD_outBuffer o{out_.data(), out_.size(), 0};
      const size_t before = in.pos;
      const size_t rc = ZSTD_decompressStream(ctx_, &o, &in);
      bytes_in_ += in.pos - before;
      if (ZSTD_isError(rc)) {
        return error_ = absl::InvalidArgumentError(
                   absl::StrCat("zstd: corrupt data near compressed byte ", bytes_in_, ": ",
                                ZSTD_getErrorName(rc)));
      }
      seen_input_ = true;
      frame_done_ = rc == 0;
      if (o.pos > 0) {
        if (absl::Status s = out(out_.data(), o.pos); !s.ok()) {
          return error_ = s;
        }
      }
      output_pending = o.pos == o.size;
      if (in.pos == before && o.pos == 0) {
        break;  // needs more input
      }
    }
    return absl::OkStatus();
  }

  absl::Status Finish(DecompressedSink) override {
    if (!error_.ok()) {
      return error_;
    }
    if (!seen_input_) {
      return error_ = absl::InvalidArgumentError("zstd: empty stream");
    }
    if (!frame_done_) {
      return error_ = absl::InvalidArgumentError("zstd: stream truncated (unexpected end of data)");
    }
    return absl::OkStatus();
  }

 private:
  ZSTD_DCtx* ctx_;
  std::vector<char> out_;
  bool seen_input_ = false;
  bool frame_done_ = false;
  absl::Status error_;
};

}  // namespace

std::unique_ptr<Decompressor> NewZstdDecompressor() { return std::make_unique<ZstdDecompressor>(); }

}  // namespace kmodd::image

// gzip through zlib. Layers may be multi-member gzip (concatenated streams, as pigz and some
// registries' re-compressors write): after each member's trailer, the next bytes start a
// new member. The input must end exactly after a complete member.

#include <zlib.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/oci/decompressor.h"

namespace kmodd::image {
namespace {

class GzipDecompressor final : public Decompressor {
 public:
  GzipDecompressor() : out_(kDecompressorChunk) {
    // inflateInit2 allocates nothing until the first inflate call, and can fail only on
    // version mismatch or memory: report that from Feed rather than throw from here.
    init_rc_ = inflateInit2(&z_, 16 + MAX_WBITS);
  }
  ~GzipDecompressor() override {
    if (init_rc_ == Z_OK) {
      inflateEnd(&z_);
    }
  }
  GzipDecompressor(const GzipDecompressor&) = delete;
  GzipDecompressor& operator=(const GzipDecompressor&) = delete;

  absl::Status Feed(const char* data, size_t n, DecompressedSink out) override {
    if (!error_.ok()) {
      return error_;
    }
    if (init_rc_ != Z_OK) {
      return error_ = absl::InternalError(absl::StrCat("gzip: inflateInit2 failed: ", init_rc_));
    }
    while (n > 0) {
      // avail_in is 32 bits: feed very large writes in slices.
      const uInt slice = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
      z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
      z_.avail_in = slice;
      if (absl::Status s = Drain(out); !s.ok()) {
        return error_ = s;
      }
      data += slice;
      n -= slice;
    }
    return absl::OkStatus();
  }

  absl::Status Finish(DecompressedSink) override {
    if (!error_.ok()) {
      return error_;
    }
    if (!seen_member_) {
      return error_ = absl::InvalidArgumentError("gzip: empty stream");
    }
    if (in_member_) {
      return error_ = absl::InvalidArgumentError("gzip: stream truncated (unexpected end of data)");
    }
    return absl::OkStatus();
  }

 private:
  // Inflates all of z_.avail_in, emitting output as it is produced, until zlib holds no
  // more pending output.
  absl::Status Drain(DecompressedSink out) {
    bool output_pending = false;  // the last call filled the buffer: zlib may hold more
    while (z_.avail_in > 0 || output_pending) {
      if (!in_member_) {
        if (z_.avail_in == 0) {
          break;
        }
        if (seen_member_ && inflateReset(&z_) != Z_OK) {
          return absl::InternalError("gzip: inflateReset failed");
        }
        in_member_ = true;
        seen_member_ = true;
      }
      z_.next_out = reinterpret_cast<Bytef*>(out_.data());
      z_.avail_out = static_cast<uInt>(out_.size());
      const uInt before_in = z_.avail_in;
      const int rc = inflate(&z_, Z_NO_FLUSH);
      const uInt consumed = before_in - z_.avail_in;
      bytes_in_ += consumed;
      const size_t produced = out_.size() - z_.avail_out;
      if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
        return absl::InvalidArgumentError(absl::StrCat("gzip: corrupt data near compressed byte ",
                                                       bytes_in_, ": ",
                                                       z_.msg != nullptr ? z_.msg : zError(rc)));
      }
      if (produced > 0) {
        if (absl::Status s = out(out_.data(), produced); !s.ok()) {
          return s;
        }
      }
      if (rc == Z_STREAM_END) {
        in_member_ = false;
        output_pending = false;
        continue;
      }
      output_pending = z_.avail_out == 0;
      if (consumed == 0 && produced == 0) {
        // Z_BUF_ERROR with input left and room for output cannot happen with zlib; never spin.
        if (z_.avail_in > 0) {
          return absl::InternalError("gzip: inflate made no progress");
        }
        break;
      }
    }
    return absl::OkStatus();
  }

  z_stream z_{};
  int init_rc_ = Z_OK;
  std::vector<char> out_;
  bool in_member_ = false;
  bool seen_member_ = false;
  absl::Status error_;
};

}  // namespace

std::unique_ptr<Decompressor> NewGzipDecompressor() { return std::make_unique<GzipDecompressor>(); }

}  // namespace kmodd::image

#include <catch2/catch.hpp>

#include <string>

#include "common/oci/decompressor.h"
#include "tests/common/oci/tar_builder.h"

using kmodd::image::Compression;
using kmodd::image::Decompressor;
using kmodd::image::LayerCompression;
using kmodd::image::NewDecompressor;
using kmodd::image::testing::Gzip;
using kmodd::image::testing::Zstd;

namespace {

std::string Payload() {
  std::string s;
  for (int i = 0; i < 300000; ++i) {
    s += static_cast<char>('a' + (i * 7 + i / 13) % 26);
  }
  return s;
}

// Feeds `in` in pieces of `chunk` bytes and returns what came out, or the first error.
absl::StatusOr<std::string> Run(Compression c, const std::string& in, size_t chunk,
                                bool finish = true) {
  std::unique_ptr<Decompressor> d = NewDecompressor(c);
  std::string out;
  auto sink = [&](const char* data, size_t n) {
    out.append(data, n);
    return absl::OkStatus();
  };
  for (size_t at = 0; at < in.size(); at += chunk) {
    if (absl::Status s = d->Feed(in.data() + at, std::min(chunk, in.size() - at), sink); !s.ok()) {
      return s;
    }
  }
  if (finish) {
    if (absl::Status s = d->Finish(sink); !s.ok()) {
      return s;
    }
  }
  CHECK(d->bytes_in() == in.size());
  return out;
}

}  // namespace

TEST_CASE("layer media types map to their compression") {
  CHECK(*LayerCompression("application/vnd.oci.image.layer.v1.tar") == Compression::kNone);
  CHECK(*LayerCompression("application/vnd.oci.image.layer.v1.tar+gzip") == Compression::kGzip);
  CHECK(*LayerCompression("application/vnd.oci.image.layer.v1.tar+zstd") == Compression::kZstd);
  CHECK(*LayerCompression("application/vnd.docker.image.rootfs.diff.tar.gzip") ==
        Compression::kGzip);
  const absl::StatusOr<Compression> bad =
      LayerCompression("application/vnd.oci.image.config.v1+json");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("unsupported layer media type"));
}

TEST_CASE("gzip decompressor inflates a stream fed one byte or many at a time") {
  const std::string payload = Payload();
  const std::string gz = Gzip(payload);
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{4096}, gz.size()}) {
    absl::StatusOr<std::string> out = Run(Compression::kGzip, gz, chunk);
    REQUIRE(out.ok());
    CHECK(*out == payload);
  }
}

TEST_CASE("gzip decompressor reads a multi-member gzip as one stream") {
  const std::string gz = Gzip("first member, ") + Gzip("second member");
  absl::StatusOr<std::string> out = Run(Compression::kGzip, gz, 5);
  REQUIRE(out.ok());
  CHECK(*out == "first member, second member");
}

TEST_CASE("gzip decompressor reports a truncated stream at Finish") {
  const std::string gz = Gzip(Payload());
  const absl::StatusOr<std::string> out = Run(Compression::kGzip, gz.substr(0, gz.size() / 2), 512);
  REQUIRE_FALSE(out.ok());
  CHECK_THAT(std::string(out.status().message()), Catch::Contains("gzip: stream truncated"));
  CHECK_FALSE(Run(Compression::kGzip, "", 1).ok());
}

TEST_CASE("gzip decompressor rejects corrupt data") {
  const std::string good = Gzip(Payload());
  struct Row {
    const char* what;
    size_t at;
    const char* error;
  };
  const Row rows[] = {
      {"magic", 0, "incorrect header check"},
      {"crc trailer", good.size() - 6, "incorrect data check"},
      {"deflate data", good.size() / 3, ""},  // any error will do
  };
  for (const Row& row : rows) {
    INFO(row.what);
    std::string gz = good;
    for (size_t i = row.at; i < std::min(gz.size(), row.at + 2); ++i) {
      gz[i] = static_cast<char>(gz[i] ^ 0x5a);
    }
    const absl::StatusOr<std::string> out = Run(Compression::kGzip, gz, 4096);
    REQUIRE_FALSE(out.ok());
    CHECK(out.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(out.status().message()), Catch::Contains(row.error));
  }
}

TEST_CASE("zstd decompressor inflates concatenated frames fed in small chunks") {
  const std::string payload = Payload();
  const std::string zst = Zstd(payload) + Zstd("tail");
  absl::StatusOr<std::string> out = Run(Compression::kZstd, zst, 3);
  REQUIRE(out.ok());
  CHECK(*out == payload + "tail");
}

TEST_CASE("zstd decompressor reports a truncated or corrupt stream") {
  const std::string zst = Zstd(Payload());
  const absl::StatusOr<std::string> cut =
      Run(Compression::kZstd, zst.substr(0, zst.size() - 9), 100);
  REQUIRE_FALSE(cut.ok());
  CHECK_THAT(std::string(cut.status().message()), Catch::Contains("zstd: stream truncated"));
  const absl::StatusOr<std::string> junk = Run(Compression::kZstd, "definitely not zstd", 100);
  REQUIRE_FALSE(junk.ok());
  CHECK_THAT(std::string(junk.status().message()), Catch::Contains("zstd: corrupt data"));
}

TEST_CASE("a consumer's error stops decompression at once") {
  const std::string gz = Gzip(std::string(10 << 20, '\0'));
  std::unique_ptr<Decompressor> d = NewDecompressor(Compression::kGzip);
  size_t calls = 0;
  const absl::Status s = d->Feed(gz.data(), gz.size(), [&](const char*, size_t n) {
    CHECK(n <= kmodd::image::kDecompressorChunk);
    ++calls;
    return absl::ResourceExhaustedError("enough");
  });
  CHECK(s.code() == absl::StatusCode::kResourceExhausted);
  CHECK(calls == 1);
  // The error is sticky.
  CHECK_FALSE(d->Finish([](const char*, size_t) { return absl::OkStatus(); }).ok());
}

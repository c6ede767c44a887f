#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/oci/tar_reader.h"
#include "tests/common/oci/tar_builder.h"

using kmodd::image::TarEntry;
using kmodd::image::TarReader;
using kmodd::image::TarType;
using kmodd::image::TarVisitor;
using kmodd::image::testing::Header;
using kmodd::image::testing::HeaderFields;
using kmodd::image::testing::TarBuilder;

namespace {

struct Seen {
  TarEntry entry;
  std::string data;
  bool ended = false;
};

class Recorder : public TarVisitor {
 public:
  absl::Status OnEntry(const TarEntry& e) override {
    seen.push_back({e, "", false});
    return absl::OkStatus();
  }
  absl::Status OnData(const char* d, size_t n) override {
    seen.back().data.append(d, n);
    return absl::OkStatus();
  }
  absl::Status OnEntryEnd() override {
    seen.back().ended = true;
    return absl::OkStatus();
  }
  std::vector<Seen> seen;
};

absl::Status Parse(const std::string& tar, Recorder& r, size_t chunk = 97) {
  TarReader reader(r);
  for (size_t at = 0; at < tar.size(); at += chunk) {
    if (absl::Status s = reader.Feed(tar.data() + at, std::min(chunk, tar.size() - at)); !s.ok()) {
      return s;
    }
  }
  return reader.Finish();
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

}  // namespace

TEST_CASE("tar reader emits entries and their data whatever the chunk size") {
  const std::string tar = TarBuilder()
                              .Dir("opt/lib/", 0755)
                              .File("opt/lib/a.ko", std::string(1000, 'x'), 0644)
                              .Symlink("opt/lib/link", "a.ko")
                              .Hardlink("opt/lib/hard", "opt/lib/a.ko")
                              .File("empty", "")
                              .Finish();
  for (size_t chunk : {size_t{1}, size_t{511}, size_t{512}, size_t{513}, tar.size()}) {
    Recorder r;
    REQUIRE(Parse(tar, r, chunk).ok());
    REQUIRE(r.seen.size() == 5);
    CHECK(r.seen[0].entry.type == TarType::kDirectory);
    CHECK(r.seen[0].entry.path == "opt/lib/");
    CHECK(r.seen[1].entry.path == "opt/lib/a.ko");
    CHECK(r.seen[1].data == std::string(1000, 'x'));
    CHECK(r.seen[1].entry.mode == 0644);
    CHECK(r.seen[2].entry.type == TarType::kSymlink);
    CHECK(r.seen[2].entry.link == "a.ko");
    CHECK(r.seen[3].entry.type == TarType::kHardlink);
    CHECK(r.seen[3].entry.link == "opt/lib/a.ko");
    CHECK(r.seen[4].data.empty());
    for (const Seen& s : r.seen) {
      CHECK(s.ended);
    }
  }
}

TEST_CASE("tar reader joins the ustar prefix and name") {
  Recorder r;
  HeaderFields f = kmodd::image::testing::Fields("file.ko", '0', 2);
  f.prefix = "opt/lib/modules";
  const std::string tar = TarBuilder().Entry(f, "hi").Finish();
  REQUIRE(Parse(tar, r).ok());
  REQUIRE(r.seen.size() == 1);
  CHECK(r.seen[0].entry.path == "opt/lib/modules/file.ko");
}

TEST_CASE("tar reader applies GNU long names and long links to the next entry only") {
  const std::string long_name = "opt/" + std::string(150, 'n') + "/file.ko";
  const std::string long_link = std::string(120, 'l');
  Recorder r;
  const std::string tar = TarBuilder()
                              .GnuLong('L', long_name)
                              .File("short", "data")
                              .GnuLong('K', long_link)
                              .GnuLong('L', "opt/link")
                              .Symlink("ignored", "ignored")
                              .File("after", "")
                              .Finish();
  REQUIRE(Parse(tar, r).ok());
  REQUIRE(r.seen.size() == 3);
  CHECK(r.seen[0].entry.path == long_name);
  CHECK(r.seen[0].data == "data");
  CHECK(r.seen[1].entry.path == "opt/link");
  CHECK(r.seen[1].entry.link == long_link);
  CHECK(r.seen[2].entry.path == "after");
}

TEST_CASE("tar reader applies PAX path, linkpath and size and ignores global headers") {
  const std::string long_path = "opt/lib/modules/6.1.0/" + std::string(200, 'p') + ".ko";
  Recorder r;
  const std::string tar = TarBuilder()
                              .Pax("comment", "global, ignored", 'g')
                              .Pax("path", long_path)
                              .File("stand-in", "content")
                              .Pax("linkpath", std::string(300, 't'))
                              .Symlink("s", "short")
                              .Finish();
  REQUIRE(Parse(tar, r).ok());
  REQUIRE(r.seen.size() == 2);
  CHECK(r.seen[0].entry.path == long_path);
  CHECK(r.seen[0].data == "content");
  CHECK(r.seen[1].entry.link == std::string(300, 't'));

  // A PAX size overrides the header's (here the header says 0).
  Recorder sized;
  const std::string tar2 =
      TarBuilder().Pax("size", "5").Entry(kmodd::image::testing::Fields("f"), "12345").Finish();
  REQUIRE(Parse(tar2, sized).ok());
  REQUIRE(sized.seen.size() == 1);
  CHECK(sized.seen[0].data == "12345");
}

TEST_CASE("tar reader rejects a header whose checksum does not match") {
  std::string tar = TarBuilder().File("a", "x").Finish();
  tar[10] = 'Z';  // inside the name field
  Recorder r;
  const absl::Status s = Parse(tar, r);
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(Message(s), Catch::Contains("tar: header checksum mismatch at byte 0"));
  CHECK(r.seen.empty());
}

TEST_CASE("tar reader reports a stream cut inside a header or file data") {
  const TarBuilder b = TarBuilder().File("a", std::string(2000, 'a'));
  // 512 header + 2000 data: cut in the data, and inside the header.
  for (const std::string& cut : {b.Unfinished().substr(0, 700), b.Unfinished().substr(0, 100)}) {
    Recorder r;
    const absl::Status s = Parse(cut, r);
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(Message(s), Catch::Contains("tar: stream truncated"));
  }
}

TEST_CASE("tar reader accepts a stream that ends cleanly after its last entry (umoci 0.4)") {
  const TarBuilder b = TarBuilder().File("a", std::string(2000, 'a')).File("b", "bb");
  const std::string full = b.Unfinished();
  // Without the marker; and without the last entry's padding either (512+2048+512+2).
  for (const std::string& cut : {full, full.substr(0, 512 + 2048 + 512 + 2)}) {
    Recorder r;
    REQUIRE(Parse(cut, r).ok());
    REQUIRE(r.seen.size() == 2);
    CHECK(r.seen[1].data == "bb");
  }
}

TEST_CASE("tar reader passes devices, fifos and unknown types to the visitor") {
  Recorder r;
  const std::string tar = TarBuilder()
                              .Special("c", '3')
                              .Special("b", '4')
                              .Special("p", '6')
                              .Entry(kmodd::image::testing::Fields("s", 'S', 3), "abc")
                              .Finish();
  REQUIRE(Parse(tar, r).ok());
  REQUIRE(r.seen.size() == 4);
  CHECK(r.seen[0].entry.type == TarType::kCharDevice);
  CHECK(r.seen[1].entry.type == TarType::kBlockDevice);
  CHECK(r.seen[2].entry.type == TarType::kFifo);
  CHECK(r.seen[3].entry.type == TarType::kOther);
  CHECK(r.seen[3].data == "abc");
  CHECK(kmodd::image::DescribeTarType('S') == "unknown entry type 'S'");
}

TEST_CASE("tar reader refuses extended headers larger than its bound") {
  Recorder r;
  TarReader reader(r, 1024);
  const std::string tar = TarBuilder().Pax("path", std::string(2000, 'p')).File("f", "").Finish();
  const absl::Status s = reader.Feed(tar.data(), tar.size());
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(Message(s), Catch::Contains("exceeds 1024"));
}

TEST_CASE("tar reader rejects malformed PAX records") {
  for (const std::string& records :
       {std::string("5 path=x\n"), std::string("x path=y\n"), std::string("10 pathx\n\n\n"),
        std::string("9 path=a"), std::string("12 path=a\0b\n", 12)}) {
    Recorder r;
    const std::string tar =
        TarBuilder()
            .Entry(kmodd::image::testing::Fields("p", 'x', records.size()), records)
            .File("f", "")
            .Finish();
    const absl::Status s = Parse(tar, r);
    INFO(records);
    REQUIRE_FALSE(s.ok());
    CHECK_THAT(Message(s), Catch::Contains("malformed PAX header"));
  }
}

TEST_CASE("tar reader reads GNU base-256 sizes") {
  std::string h = Header(kmodd::image::testing::Fields("big"));
  // Size 3 in base-256: 0x80 then big-endian bytes; fix the checksum afterwards.
  std::memset(&h[124], 0, 12);
  h[124] = static_cast<char>(0x80);
  h[135] = 3;
  std::memset(&h[148], ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) {
    sum += c;
  }
  kmodd::image::testing::PutOctal(&h[148], 7, sum);
  Recorder r;
  REQUIRE(Parse(TarBuilder().Raw(h).Raw(kmodd::image::testing::Padded("abc")).Finish(), r).ok());
  REQUIRE(r.seen.size() == 1);
  CHECK(r.seen[0].data == "abc");
}

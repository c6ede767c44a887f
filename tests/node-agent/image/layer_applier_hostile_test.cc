// Hostile and broken images: each is rejected with an error naming the layer, the entry and
// the rule, and leaves nothing behind (no tree, no staging directory).

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "node-agent/image/layer_applier.h"
#include "common/oci/layer_path.h"
#include "tests/node-agent/image/applier_rig.h"
#include "tests/common/oci/tar_builder.h"
#include "tests/temp_dir.h"

using kmodd::image::Compression;
using kmodd::image::LayerApplier;
using kmodd::image::LayerSink;
using kmodd::image::Limits;
using kmodd::image::testing::ApplyImage;
using kmodd::image::testing::Fields;
using kmodd::image::testing::Gzip;
using kmodd::image::testing::GzipWriter;
using kmodd::image::testing::Header;
using kmodd::image::testing::TarBuilder;
using kmodd::image::testing::Tree;
using kmodd::testing::TempDir;
using kmodd::image::testing::Zstd;

namespace {

const std::vector<std::string> kKeep = {"opt/lib/modules/6.1.0/", "firmware/"};
const std::string kMod = "opt/lib/modules/6.1.0";

// Starts like a real driver layer, so that every rejection has something to clean up.
TarBuilder Good() { return TarBuilder().File(kMod + "/good.ko", "ok").File("firmware/fw", "fw"); }

struct Case {
  std::string name;
  Compression compression;
  std::string bytes;
  std::vector<std::string> expect;  // substrings of the error, after "layer sha256:hostile: "
  Limits limits = {};
};

Limits With(uint64_t Limits::*field, uint64_t v) {
  Limits l;
  l.*field = v;
  return l;
}

std::string Bomb(size_t bytes) {
  GzipWriter w;
  w.Write(Header(Fields(kMod + "/bomb.ko", '0', bytes)));
  const std::string zeros(size_t{1} << 20, '\0');
  for (size_t done = 0; done < bytes; done += zeros.size()) {
    w.Write(zeros);
  }
  w.Write(std::string(1024, '\0'));
  return w.Finish();
}

// `rounds` directories as deep and long as the limits allow beneath the kept path, each named
// apart so that no prefix repeats, each replaced at once by a file at its top (which removes
// it: the disk stays small, and only the writer's memory of the paths could grow).
struct DeepLayer {
  std::string tar;
  uint64_t kept_entries = 0;
  uint64_t kept_path_bytes = 0;  // of the kept entries' paths, each counted once
};
DeepLayer DeepPaths(TarBuilder b, int rounds) {
  DeepLayer out;
  for (int i = 0; i < rounds; ++i) {
    const std::string top = kMod + "/r" + std::to_string(i);
    std::string deep = top;
    while (kmodd::image::PathDepth(deep) < 127 && deep.size() + 31 <= 4096) {
      deep += "/" + std::string(30, static_cast<char>('a' + i % 26));
    }
    b.Pax("path", deep).Dir("PaxHeaders/stand-in").File(top, "");
    out.kept_entries += 2;
    out.kept_path_bytes += deep.size() + top.size();
  }
  out.tar = b.Finish();
  return out;
}

std::vector<Case> Cases() {
  std::vector<Case> c;
  auto tar = [](const TarBuilder& b) { return b.Finish(); };
  c.push_back({"a '..' escape",
               Compression::kNone,
               tar(Good().File("../../etc/passwd", "root::0:0")),
               {"entry \"../../etc/passwd\": path has a '..' component"}});
  c.push_back({"an absolute path",
               Compression::kGzip,
               Gzip(tar(Good().File("/etc/passwd", "x"))),
               {"entry \"/etc/passwd\": absolute path"}});
  c.push_back(
      {"a symlink escaping the root",
       Compression::kNone,
       tar(Good().Symlink("firmware/evil", "../../../etc").File("firmware/evil/passwd", "x")),
       {"entry \"firmware/evil\": symlink target \"../../../etc\" escapes the image root"}});
  c.push_back({"an absolute symlink",
               Compression::kNone,
               tar(Good().Symlink("firmware/evil", "/etc")),
               {"entry \"firmware/evil\": symlink target \"/etc\" is absolute"}});
  c.push_back({"a write through a symlink",
               Compression::kNone,
               tar(Good().Symlink("firmware/dir", "../opt").File("firmware/dir/x.ko", "x")),
               {"entry \"firmware/dir/x.ko\": firmware/dir: is a symlink; refusing to write "
                "through it"}});
  c.push_back({"a hardlink out of the root",
               Compression::kNone,
               tar(Good().Hardlink("firmware/h", "../../etc/shadow")),
               {"entry \"firmware/h\": hardlink target \"../../etc/shadow\": path has a '..'"}});
  c.push_back({"a hardlink to a path that is not extracted",
               Compression::kNone,
               tar(Good().File("usr/bin/su", "x").Hardlink("firmware/h", "usr/bin/su")),
               {"entry \"firmware/h\": hardlink target \"usr/bin/su\" is outside the extracted"}});
  c.push_back({"a hardlink to a later entry",
               Compression::kNone,
               tar(Good().Hardlink("firmware/h", "firmware/later").File("firmware/later", "x")),
               {"hardlink target \"firmware/later\" is not a regular file extracted before it"}});
  c.push_back({"a character device",
               Compression::kNone,
               tar(Good().Special("firmware/mem", '3')),
               {"entry \"firmware/mem\": character device not allowed"}});
  c.push_back({"a block device",
               Compression::kNone,
               tar(Good().Special("firmware/sda", '4')),
               {"entry \"firmware/sda\": block device not allowed"}});
  c.push_back({"a fifo",
               Compression::kNone,
               tar(Good().Special("firmware/pipe", '6')),
               {"entry \"firmware/pipe\": fifo not allowed"}});
  c.push_back({"an entry of unknown type",
               Compression::kNone,
               tar(Good().Special("firmware/sparse", 'S')),
               {"entry \"firmware/sparse\": unknown entry type 'S' not allowed"}});
  c.push_back({"a setuid file",
               Compression::kZstd,
               Zstd(tar(Good().File(kMod + "/suid", "x", 04755))),
               {"entry \"" + kMod + "/suid\": setuid/setgid file not allowed (mode 4755)"}});
  c.push_back({"a setgid file",
               Compression::kNone,
               tar(Good().File("firmware/sgid", "x", 02711)),
               {"setuid/setgid file not allowed (mode 2711)"}});
  c.push_back({"a file larger than the limit",
               Compression::kNone,
               tar(Good().File("usr/share/big", std::string(5000, 'b'))),
               {"entry \"usr/share/big\": file of 5000 bytes exceeds the limit of 4096 bytes"},
               With(&Limits::max_file_bytes, 4096)});
  c.push_back({"more data than the image limit",
               Compression::kNone,
               tar(Good().File("a", std::string(3000, 'a')).File("b", std::string(3000, 'b'))),
               {"entry \"b\": image data exceeds the limit of 5000 bytes"},
               With(&Limits::max_total_bytes, 5000)});
  TarBuilder many = Good();
  for (int i = 0; i < 20; ++i) {
    many.File("usr/share/doc/" + std::to_string(i), "");
  }
  c.push_back({"too many entries",
               Compression::kGzip,
               Gzip(tar(many)),
               // The count is per image: the lower layer had 2 entries, Good() 2 more.
               {"entry \"usr/share/doc/6\": image has more than 10 entries"},
               With(&Limits::max_entries, 10)});
  c.push_back({"a path longer than the limit",
               Compression::kNone,
               tar(Good().PaxFile("usr/" + std::string(5000, 'p'), "")),
               {"path or link target longer than 4096 bytes"}});
  std::string deep = "firmware";
  for (int i = 0; i < 200; ++i) {
    deep += "/d";
  }
  c.push_back({"a path deeper than the limit",
               Compression::kNone,
               tar(Good().PaxFile(deep, "")),
               {"path deeper than 128 components"}});
  c.push_back({"more bytes of extracted paths in one layer than the limit",
               Compression::kGzip,
               Gzip(DeepPaths(Good(), 10).tar),
               {"more than 30000 bytes of extracted paths in one layer: refused to bound the "
                "agent's memory"},
               With(&Limits::max_layer_path_bytes, 30'000)});
  c.push_back({"more extracted paths in one layer than the limit",
               Compression::kNone,
               DeepPaths(Good(), 10).tar,
               {"more than 15 extracted paths in one layer: refused to bound the agent's memory"},
               With(&Limits::max_layer_paths, 15)});
  c.push_back({"a gzip decompression bomb (200 MiB of zeros)",
               Compression::kGzip,
               Bomb(size_t{200} << 20),
               {"entry \"" + kMod + "/bomb.ko\": decompression ratio reached 100:1",
                "a decompression bomb"}});
  c.push_back({"a zstd decompression bomb",
               Compression::kZstd,
               Zstd(Header(Fields("usr/zeros", '0', 64 << 20)) + std::string(64 << 20, '\0')),
               {"entry \"usr/zeros\": decompression ratio reached 100:1"}});
  const std::string gz = Gzip(tar(Good().File(kMod + "/big.ko", std::string(200000, 'x'))));
  c.push_back({"a truncated gzip stream",
               Compression::kGzip,
               gz.substr(0, gz.size() / 2),
               {"entry \"" + kMod + "/big.ko\": gzip: stream truncated"}});
  const std::string unfinished = Good().File("firmware/more", std::string(3000, 'm')).Unfinished();
  c.push_back({"a tar stream cut inside file data",
               Compression::kNone,
               unfinished.substr(0, unfinished.size() - 2000),
               {"tar: stream truncated"}});
  std::string corrupt = gz;
  corrupt[1] = 'X';
  c.push_back({"a corrupt gzip header",
               Compression::kGzip,
               corrupt,
               {"gzip: corrupt data", "incorrect header check"}});
  c.push_back({"an empty gzip stream", Compression::kGzip, "", {"gzip: empty stream"}});
  std::string bad_sum = tar(Good().File("firmware/x", "x"));
  bad_sum[2048 + 3] ^= 1;  // the third header's name
  c.push_back({"a header with a bad checksum",
               Compression::kNone,
               bad_sum,
               {"after entry \"firmware/fw\": tar: header checksum mismatch at byte 2048"}});
  return c;
}

}  // namespace

TEST_CASE("hostile and broken images are rejected and leave nothing behind") {
  // Catch runs the test once per section: build the cases (a 200 MiB bomb among them) once.
  static const std::vector<Case> cases = Cases();
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name) {
      TempDir tmp;
      const std::string good = Gzip(Good().Finish());
      const absl::Status s = ApplyImage(
          tmp / "images/tree",
          {{"sha256:lower", Compression::kGzip, good}, {"sha256:hostile", c.compression, c.bytes}},
          kKeep, c.limits, 64 * 1024);
      REQUIRE_FALSE(s.ok());
      const std::string msg(s.message());
      INFO(msg);
      CHECK(s.code() == absl::StatusCode::kInvalidArgument);
      CHECK_THAT(msg, Catch::StartsWith("layer sha256:hostile: "));
      for (const std::string& e : c.expect) {
        CHECK_THAT(msg, Catch::Contains(e));
      }
      CHECK(Tree(tmp.path) == std::vector<std::string>{"images/"});
    }
  }
}

TEST_CASE("after a rejection every later call returns the same error") {
  TempDir tmp;
  absl::StatusOr<LayerApplier> a = LayerApplier::Begin(tmp / "tree", Limits{}, kKeep, false);
  REQUIRE(a.ok());
  absl::StatusOr<std::unique_ptr<LayerSink>> sink = a->StartLayer("sha256:x", Compression::kNone);
  REQUIRE(sink.ok());
  const std::string tar = TarBuilder().File("/abs", "").Finish();
  const absl::Status first = (*sink)->Write(tar.data(), tar.size());
  REQUIRE_FALSE(first.ok());
  CHECK((*sink)->Write(tar.data(), tar.size()) == first);
  CHECK((*sink)->Finish() == first);
  CHECK(a->StartLayer("sha256:y", Compression::kNone).status() == first);
  CHECK(a->Commit() == first);
  CHECK(Tree(tmp.path).empty());
}

TEST_CASE("a symlink from a lower layer cannot redirect an upper layer's write") {
  TempDir tmp;
  // Allowed on its own: it points inside the root.
  const std::string lower = TarBuilder().Symlink("firmware/dir", "../opt").Finish();
  const std::string upper = TarBuilder().File("firmware/dir/planted.ko", "x").Finish();
  const absl::Status s = ApplyImage(
      tmp / "tree",
      {{"sha256:lower", Compression::kNone, lower}, {"sha256:upper", Compression::kNone, upper}},
      kKeep);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("layer sha256:upper: entry \"firmware/dir/planted.ko\": firmware/dir: "
                             "is a symlink; refusing to write through it"));
  CHECK(Tree(tmp.path).empty());
}

TEST_CASE("a layer of long, deep paths is extracted remembering each kept path once") {
  TempDir tmp;
  // Each round costs ~120 mkdirs, slow on a journaling file system: few rounds suffice.
  const DeepLayer layer = DeepPaths(TarBuilder(), 10);
  absl::StatusOr<LayerApplier> a = LayerApplier::Begin(tmp / "tree", Limits{}, kKeep, false);
  REQUIRE(a.ok());
  absl::StatusOr<std::unique_ptr<LayerSink>> sink = a->StartLayer("sha256:deep", Compression::kNone);
  REQUIRE(sink.ok());
  REQUIRE((*sink)->Write(layer.tar.data(), layer.tar.size()).ok());
  REQUIRE((*sink)->Finish().ok());
  // Every prefix of every path (what a set of prefixes held) came to ~2.4 MB here.
  INFO("tracked " << a->stats().tracked_paths << " paths, " << a->stats().tracked_path_bytes
                  << " bytes; the layer's kept paths: " << layer.kept_entries << ", "
                  << layer.kept_path_bytes << " bytes");
  CHECK(a->stats().tracked_paths <= layer.kept_entries);
  CHECK(a->stats().tracked_path_bytes <= layer.kept_path_bytes);
  REQUIRE(a->Commit().ok());
  CHECK(Tree(tmp / "tree").size() == 4 + 10);  // opt/ ... 6.1.0/ and the files r0..r9
}

// The signed modules' layer: what BuildLayer writes reads back through the agent's own gzip
// and tar readers, byte for byte, deterministically; paths a ustar header cannot hold or
// that are not clean are refused.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "common/oci/decompressor.h"
#include "common/oci/sha256.h"
#include "common/oci/tar_reader.h"
#include "controller/sign/layer_builder.h"

namespace kmodd::sign {
namespace {

struct Read : image::TarVisitor {
  std::map<std::string, std::string> files;
  std::map<std::string, uint32_t> modes;
  std::vector<std::string> dirs;
  std::string current;
  absl::Status OnEntry(const image::TarEntry& e) override {
    current = e.path;
    if (e.type == image::TarType::kDirectory) {
      dirs.push_back(e.path);
    } else {
      files[e.path];
      modes[e.path] = e.mode;
    }
    return absl::OkStatus();
  }
  absl::Status OnData(const char* d, size_t n) override {
    files[current].append(d, n);
    return absl::OkStatus();
  }
  absl::Status OnEntryEnd() override { return absl::OkStatus(); }
};

Read Unpack(const BuiltLayer& l) {
  Read r;
  image::TarReader tar(r);
  auto gz = image::NewDecompressor(image::Compression::kGzip);
  auto sink = [&](const char* p, size_t n) { return tar.Feed(p, n); };
  REQUIRE(gz->Feed(l.gzip.data(), l.gzip.size(), sink).ok());
  REQUIRE(gz->Finish(sink).ok());
  REQUIRE(tar.Finish().ok());
  return r;
}

TEST_CASE("sign layer: files read back byte for byte, parents first, with their digests") {
  const std::string long_dir = "opt/lib/modules/" + std::string(90, 'k') + "/updates/" + std::string(40, 'd');
  std::vector<LayerFile> files = {
      {"opt/lib/modules/K/a.ko", std::string("\x7f" "ELF", 4) + std::string(1000, 'a'), 0644},
      {"opt/lib/modules/K/extra/b.ko", std::string(512, 'b'), 0600},
      {long_dir + "/c.ko", "c", 0644},  // over 100 bytes: split into prefix and name
  };
  auto l = BuildLayer(files);
  REQUIRE(l.ok());
  CHECK(l->diff_id == image::Sha256::Of(l->tar));
  CHECK(l->digest == image::Sha256::Of(l->gzip));
  const Read r = Unpack(*l);
  REQUIRE(r.files.size() == 3);
  for (const LayerFile& f : files) {
    CHECK(r.files.at(f.path) == f.data);
    CHECK(r.modes.at(f.path) == f.mode);
  }
  CHECK(r.dirs == std::vector<std::string>{"opt", "opt/lib", "opt/lib/modules", "opt/lib/modules/K",
                                           "opt/lib/modules/K/extra", "opt/lib/modules/" + std::string(90, 'k'),
                                           "opt/lib/modules/" + std::string(90, 'k') + "/updates", long_dir});
  // Deterministic: the same files, the same bytes.
  auto again = BuildLayer(files);
  REQUIRE(again.ok());
  CHECK(again->digest == l->digest);
}

TEST_CASE("sign layer: paths a layer cannot hold are refused naming the path") {
  for (const std::string& path : {std::string(""), std::string("/abs/a.ko"), std::string("a/../b.ko"),
                                  std::string("a//b.ko"), std::string("./a.ko"), std::string("dir/"),
                                  "opt/" + std::string(101, 'x') + ".ko", std::string(300, 'y')}) {
    auto l = BuildLayer({{path, "x", 0644}});
    INFO(path);
    REQUIRE_FALSE(l.ok());
    CHECK_THAT(std::string(l.status().message()), Catch::Contains("\"" + path + "\""));
  }
}

}  // namespace
}  // namespace kmodd::sign

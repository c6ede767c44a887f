#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <string>
#include <vector>

#include "node-agent/image/layer_applier.h"
#include "tests/node-agent/image/applier_rig.h"
#include "tests/common/oci/tar_builder.h"
#include "tests/temp_dir.h"

using kmodd::image::Compression;
using kmodd::image::LayerApplier;
using kmodd::image::LayerSink;
using kmodd::image::Limits;
using kmodd::image::testing::ApplyImage;
using kmodd::image::testing::Gzip;
using kmodd::image::testing::Layer;
using kmodd::image::testing::Mode;
using kmodd::image::testing::ReadFile;
using kmodd::image::testing::TarBuilder;
using kmodd::image::testing::Tree;
using kmodd::testing::TempDir;
using kmodd::image::testing::Zstd;
using V = std::vector<std::string>;

namespace {

const V kKeep = {"opt/lib/modules/6.1.0-18-amd64/", "firmware/"};
constexpr const char* kModules = "opt/lib/modules/6.1.0-18-amd64";

// A KMM driver image: a distribution base, the driver tree and its firmware.
std::string KmmLayer() {
  return TarBuilder()
      .Dir("./")
      .Dir("usr/")
      .Dir("usr/bin/")
      .File("usr/bin/kmod", "ELF kmod", 0755)
      .File("usr/bin/su", "ELF su", 04755)  // setuid, but not kept: harmless
      .Special("dev/null", '3')             // a device, but not kept: never created
      .Dir("opt/")
      .Dir("opt/lib/")
      .Dir("opt/lib/modules/")
      .Dir("opt/lib/modules/6.1.0-18-amd64/")
      .File("opt/lib/modules/6.1.0-18-amd64/kmm_ci_a.ko", "module a")
      .File("opt/lib/modules/6.1.0-18-amd64/modules.dep", "kmm_ci_a.ko:\n")
      .File("opt/lib/modules/6.2.0/other.ko", "another kernel's module")
      .Dir("firmware/")
      .File("firmware/kmm/fw.bin", std::string(100000, 'f'))
      .Finish();
}

}  // namespace

TEST_CASE("applier extracts the KMM layout and drops every path it does not keep") {
  TempDir tmp;
  const std::string dest = tmp / "trees/sha256-abc";
  REQUIRE(ApplyImage(dest, {{"sha256:kmm", Compression::kGzip, Gzip(KmmLayer())}}, kKeep).ok());
  CHECK(Tree(dest) == V{"firmware/", "firmware/kmm/", "firmware/kmm/fw.bin", "opt/", "opt/lib/",
                        "opt/lib/modules/", "opt/lib/modules/6.1.0-18-amd64/",
                        "opt/lib/modules/6.1.0-18-amd64/kmm_ci_a.ko",
                        "opt/lib/modules/6.1.0-18-amd64/modules.dep"});
  CHECK(ReadFile(dest + "/" + kModules + "/kmm_ci_a.ko") == "module a");
  CHECK(ReadFile(dest + "/firmware/kmm/fw.bin") == std::string(100000, 'f'));
  CHECK(Mode(dest) == 0755);
  // Nothing but the tree itself is left next to it.
  CHECK(Tree(tmp / "trees").size() == Tree(dest).size() + 1);
}

TEST_CASE("the kernel tree's build and source links are dropped; any other escaping link refuses") {
  TempDir tmp;
  auto layer = [](const char* name, const char* target) {
    return TarBuilder()
        .File("opt/lib/modules/6.1.0-18-amd64/kmm_ci_a.ko", "module a")
        .Symlink(std::string("opt/lib/modules/6.1.0-18-amd64/") + name, target)
        .Finish();
  };
  const std::string dest = tmp / "trees/a";
  REQUIRE(ApplyImage(dest,
                     {{"sha256:b", Compression::kNone,
                       layer("build", "/usr/src/linux-headers-6.1.0-18-amd64")},
                      {"sha256:s", Compression::kNone, layer("source", "../../../../../usr/src")}},
                     kKeep)
              .ok());
  CHECK(Tree(dest) == V{"opt/", "opt/lib/", "opt/lib/modules/", "opt/lib/modules/6.1.0-18-amd64/",
                        "opt/lib/modules/6.1.0-18-amd64/kmm_ci_a.ko"});
  const auto refused = ApplyImage(tmp / "trees/b",
                                  {{"sha256:e", Compression::kNone, layer("builds", "/etc")}}, kKeep);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(std::string(refused.message()), Catch::Contains("symlink target \"/etc\" is absolute"));
}

TEST_CASE("applier gives the same tree whether bytes arrive one at a time or all at once") {
  for (size_t chunk : {size_t{1}, size_t{4096}, size_t{1} << 20}) {
    TempDir tmp;
    const std::string dest = tmp / "tree";
    REQUIRE(ApplyImage(dest, {{"sha256:z", Compression::kZstd, Zstd(KmmLayer())}}, kKeep, {}, chunk)
                .ok());
    CHECK(ReadFile(dest + "/" + kModules + "/modules.dep") == "kmm_ci_a.ko:\n");
    CHECK(ReadFile(dest + "/firmware/kmm/fw.bin").size() == 100000);
  }
}

TEST_CASE("upper layers' whiteouts remove lower files and opaque directories hide lower content") {
  TempDir tmp;
  const std::string dest = tmp / "tree";
  const std::string m = kModules;
  const std::string base = TarBuilder()
                               .File(m + "/a.ko", "a1")
                               .File(m + "/b.ko", "b1")
                               .File(m + "/extra/c.ko", "c1")
                               .File("firmware/old/x.bin", "x")
                               .File("firmware/keep.bin", "k")
                               .File("firmware/gone/y.bin", "y")
                               .Finish();
  const std::string upper = TarBuilder()
                                .Whiteout(m, "b.ko")
                                .File(m + "/a.ko", "a2")
                                // The opaque marker may come after this layer's own entries:
                                // they stay, the lower c.ko goes.
                                .File(m + "/extra/d.ko", "d2")
                                .Opaque(m + "/extra")
                                .Whiteout("firmware", "gone")
                                .Dir("firmware/old/")
                                .Opaque("firmware/old")
                                .File("firmware/old/new.bin", "n")
                                .Finish();
  const std::string top = TarBuilder().Whiteout(m, "a.ko").File(m + "/a.ko", "a3").Finish();
  REQUIRE(ApplyImage(dest,
                     {{"sha256:base", Compression::kGzip, Gzip(base)},
                      {"sha256:upper", Compression::kZstd, Zstd(upper)},
                      {"sha256:top", Compression::kNone, top}},
                     kKeep)
              .ok());
  CHECK(Tree(dest) == V{"firmware/", "firmware/keep.bin", "firmware/old/", "firmware/old/new.bin",
                        "opt/", "opt/lib/", "opt/lib/modules/", "opt/lib/modules/6.1.0-18-amd64/",
                        "opt/lib/modules/6.1.0-18-amd64/a.ko",
                        "opt/lib/modules/6.1.0-18-amd64/extra/",
                        "opt/lib/modules/6.1.0-18-amd64/extra/d.ko"});
  // A whiteout hides only lower layers: "top" whites out a.ko and ships a new one.
  CHECK(ReadFile(dest + "/" + m + "/a.ko") == "a3");
}

TEST_CASE("a whiteout or non-directory replacing a directory above the kept paths removes them") {
  TempDir tmp;
  const std::string base =
      TarBuilder().File(std::string(kModules) + "/a.ko", "a").File("firmware/f", "f").Finish();
  const std::string upper = TarBuilder().Whiteout("opt", "lib").File("firmware/g", "g").Finish();
  REQUIRE(ApplyImage(tmp / "one",
                     {{"sha256:base", Compression::kNone, base},
                      {"sha256:upper", Compression::kNone, upper}},
                     kKeep)
              .ok());
  CHECK(Tree(tmp / "one") == V{"firmware/", "firmware/f", "firmware/g", "opt/"});

  const std::string replaced = TarBuilder().Symlink("opt", "/elsewhere").Finish();
  REQUIRE(ApplyImage(tmp / "two",
                     {{"sha256:base", Compression::kNone, base},
                      {"sha256:replaced", Compression::kNone, replaced}},
                     kKeep)
              .ok());
  CHECK(Tree(tmp / "two") == V{"firmware/", "firmware/f"});
}

TEST_CASE("applier extracts PAX and GNU long paths") {
  TempDir tmp;
  const std::string deep =
      std::string(kModules) + "/" + std::string(120, 'd') + "/" + std::string(120, 'e') + "/mod.ko";
  const std::string gnu = std::string(kModules) + "/" + std::string(150, 'g') + ".ko";
  const std::string tar =
      TarBuilder().PaxFile(deep, "pax").GnuLong('L', gnu).File("stand-in", "gnu").Finish();
  REQUIRE(ApplyImage(tmp / "tree", {{"sha256:pax", Compression::kGzip, Gzip(tar)}}, kKeep).ok());
  CHECK(ReadFile(tmp / ("tree/" + deep)) == "pax");
  CHECK(ReadFile(tmp / ("tree/" + gnu)) == "gnu");
}

TEST_CASE("applier caps modes, strips sticky bits and keeps links that stay inside") {
  TempDir tmp;
  const std::string m = kModules;
  const std::string tar = TarBuilder()
                              .Dir(m + "/", 01777)
                              .File(m + "/exec.sh", "#!", 0777)
                              .File(m + "/secret", "s", 0400)
                              .File(m + "/sticky", "t", 01644)
                              .Dir("firmware/", 0500)
                              .File("firmware/a.bin", "A")
                              .Symlink("firmware/alias.bin", "a.bin")
                              .Symlink("firmware/mods", "../opt/lib/modules")
                              .Hardlink(m + "/hard.bin", "firmware/a.bin")
                              .Finish();
  REQUIRE(ApplyImage(tmp / "tree", {{"sha256:m", Compression::kNone, tar}}, kKeep).ok());
  const std::string d = tmp / "tree/";
  CHECK(Mode(d + m) == 0755);
  CHECK(Mode(d + m + "/exec.sh") == 0755);
  CHECK(Mode(d + m + "/secret") == 0600);
  CHECK(Mode(d + m + "/sticky") == 0644);
  CHECK(Mode(d + "firmware") == 0700);
  CHECK(ReadFile(d + "firmware/alias.bin") == "A");
  CHECK(ReadFile(d + m + "/hard.bin") == "A");
  struct stat a {
  }, b{};
  REQUIRE(stat((d + "firmware/a.bin").c_str(), &a) == 0);
  REQUIRE(stat((d + m + "/hard.bin").c_str(), &b) == 0);
  CHECK(a.st_ino == b.st_ino);
  CHECK(Tree(d + "firmware") == V{"a.bin", "alias.bin -> a.bin", "mods -> ../opt/lib/modules"});
}

TEST_CASE("applier refuses a destination that already exists and leaves it untouched") {
  TempDir tmp;
  std::filesystem::create_directories(tmp / "tree/mine");
  const absl::StatusOr<LayerApplier> a = LayerApplier::Begin(tmp / "tree", Limits{}, kKeep);
  REQUIRE_FALSE(a.ok());
  CHECK(a.status().code() == absl::StatusCode::kAlreadyExists);
  CHECK(Tree(tmp.path) == V{"tree/", "tree/mine/"});
}

TEST_CASE("a destination appearing before commit fails the commit and removes the staging") {
  TempDir tmp;
  absl::StatusOr<LayerApplier> a = LayerApplier::Begin(tmp / "tree", Limits{}, kKeep, false);
  REQUIRE(a.ok());
  std::filesystem::create_directories(tmp / "tree/racer");
  CHECK(a->Commit().code() == absl::StatusCode::kAlreadyExists);
  CHECK(Tree(tmp.path) == V{"tree/", "tree/racer/"});
}

TEST_CASE("applier removes its staging directory on abort, destruction and abandoned layers") {
  TempDir tmp;
  {
    absl::StatusOr<LayerApplier> a = LayerApplier::Begin(tmp / "tree", Limits{}, kKeep, false);
    REQUIRE(a.ok());
    CHECK(kmodd::image::IsStagingDirName(
        std::filesystem::path(a->staging_dir()).filename().string()));
    CHECK(Tree(tmp.path).size() == 1);
  }
  CHECK(Tree(tmp.path).empty());

  absl::StatusOr<LayerApplier> a = LayerApplier::Begin(tmp / "tree", Limits{}, kKeep, false);
  REQUIRE(a.ok());
  {
    absl::StatusOr<std::unique_ptr<LayerSink>> sink =
        a->StartLayer("sha256:half", Compression::kNone);
    REQUIRE(sink.ok());
    const std::string tar = TarBuilder().File("firmware/x", "x").Finish();
    REQUIRE((*sink)->Write(tar.data(), 600).ok());
    CHECK_FALSE(a->StartLayer("sha256:next", Compression::kNone).ok());  // one at a time
  }
  const absl::Status s = a->Commit();
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()), Catch::Contains("layer sha256:half"));
  CHECK_THAT(std::string(s.message()), Catch::Contains("abandoned before Finish"));
  CHECK(Tree(tmp.path).empty());
}

#include <catch2/catch.hpp>

#include <string>

#include "common/oci/layer_path.h"

using kmodd::image::CheckSymlinkTarget;
using kmodd::image::ClassifyWhiteout;
using kmodd::image::IsKernelBuildLink;
using kmodd::image::KeepFilter;
using kmodd::image::NormalizeEntryPath;
using kmodd::image::Whiteout;

TEST_CASE("entry paths are normalised, and absolute paths and '..' refused") {
  struct Row {
    std::string raw, want, error;
  };
  const Row rows[] = {
      {"opt/lib/a.ko", "opt/lib/a.ko", ""},
      {"./opt//lib/./a.ko", "opt/lib/a.ko", ""},
      {"opt/lib/", "opt/lib", ""},
      {"./", "", ""},
      {".", "", ""},
      {"/", "", ""},  // the root as Go's archive/tar (umoci) names it
      {"/./", "", ""},
      {"/..", "", "absolute path"},
      {"/etc/passwd", "", "absolute path"},
      {"../etc/passwd", "", "'..' component"},
      {"opt/../../x", "", "'..' component"},
      {"opt/a/../b", "", "'..' component"},  // stays inside, but no well-formed layer says so
      {"opt/..", "", "'..' component"},
      {"opt/..a/b..", "opt/..a/b..", ""},
  };
  for (const Row& row : rows) {
    INFO(row.raw);
    const absl::StatusOr<std::string> got = NormalizeEntryPath(row.raw);
    if (row.error.empty()) {
      REQUIRE(got.ok());
      CHECK(*got == row.want);
    } else {
      REQUIRE_FALSE(got.ok());
      CHECK_THAT(std::string(got.status().message()), Catch::Contains(row.error));
    }
  }
}

TEST_CASE("symlink targets must stay beneath the root without '..' after a name") {
  struct Row {
    std::string link, target, error;
  };
  const Row rows[] = {
      {"firmware/a", "b", ""},
      {"firmware/x/a", "../b/c", ""},
      {"firmware/x/a", "../../opt/lib", ""},
      {"firmware/a", "./b", ""},
      {"firmware/a", "..", ""},  // the root itself
      {"firmware/a", "../..", "escapes the image root"},
      {"a", "../etc", "escapes the image root"},
      {"firmware/a", "/etc/passwd", "is absolute"},
      {"firmware/a", "b/../../..", "'..' after a name"},
      {"firmware/a", "b/..", "'..' after a name"},
      {"firmware/a", "", "empty target"},
  };
  for (const Row& row : rows) {
    INFO(row.link << " -> " << row.target);
    const absl::Status s = CheckSymlinkTarget(row.link, row.target);
    if (row.error.empty()) {
      CHECK(s.ok());
    } else {
      REQUIRE_FALSE(s.ok());
      CHECK_THAT(std::string(s.message()), Catch::Contains(row.error));
    }
  }
}

TEST_CASE("whiteout names are classified as removals, opaque markers or AUFS bookkeeping") {
  CHECK(ClassifyWhiteout("opt/lib/a.ko")->kind == Whiteout::kNone);
  CHECK(ClassifyWhiteout("opt/lib/.wh.a.ko")->kind == Whiteout::kRemove);
  CHECK(ClassifyWhiteout("opt/lib/.wh.a.ko")->target == "opt/lib/a.ko");
  CHECK(ClassifyWhiteout(".wh.opt")->target == "opt");
  CHECK(ClassifyWhiteout("opt/lib/.wh..wh..opq")->kind == Whiteout::kOpaque);
  CHECK(ClassifyWhiteout("opt/lib/.wh..wh..opq")->target == "opt/lib");
  CHECK(ClassifyWhiteout(".wh..wh..opq")->target == "");
  CHECK(ClassifyWhiteout("opt/.wh..wh.plnk")->kind == Whiteout::kIgnore);
  CHECK_FALSE(ClassifyWhiteout("opt/.wh.").ok());
}

TEST_CASE("keep filter keeps whole subtrees and knows the directories enclosing them") {
  const absl::StatusOr<KeepFilter> f = KeepFilter::Make({"/opt/lib/modules/6.1.0/", "firmware/"});
  REQUIRE(f.ok());
  CHECK(f->Keeps("opt/lib/modules/6.1.0"));
  CHECK(f->Keeps("opt/lib/modules/6.1.0/extra/a.ko"));
  CHECK(f->Keeps("firmware/i915/x.bin"));
  CHECK_FALSE(f->Keeps("opt/lib/modules/6.1.0-other/a.ko"));
  CHECK_FALSE(f->Keeps("firmware-old/x"));
  CHECK_FALSE(f->Keeps("usr/bin/kmod"));
  CHECK(f->Encloses(""));
  CHECK(f->Encloses("opt"));
  CHECK(f->Encloses("opt/lib/modules"));
  CHECK_FALSE(f->Encloses("opt/lib/modules/6.1.0"));
  CHECK_FALSE(f->Encloses("usr"));
  CHECK_FALSE(KeepFilter::Make({"../firmware"}).ok());
  const absl::StatusOr<KeepFilter> all = KeepFilter::Make({""});
  CHECK(all->Keeps("anything/at/all"));
}

TEST_CASE("the kernel tree's build and source links are recognised by their place") {
  CHECK(IsKernelBuildLink("opt/lib/modules/6.1.0-18-amd64/build"));
  CHECK(IsKernelBuildLink("lib/modules/6.1.0-18-amd64/source"));
  CHECK_FALSE(IsKernelBuildLink("opt/lib/modules/6.1.0-18-amd64/extra/build"));
  CHECK_FALSE(IsKernelBuildLink("opt/lib/modules/build"));
  CHECK_FALSE(IsKernelBuildLink("firmware/build"));
  CHECK_FALSE(IsKernelBuildLink("opt/lib/modules/6.1.0-18-amd64/builds"));
}

TEST_CASE("archive paths are named as the merged filesystem names them") {
  using kmodd::image::CleanArchivePath;
  CHECK(CleanArchivePath("./opt/lib/") == "opt/lib");
  CHECK(CleanArchivePath("/opt") == "opt");
  CHECK(CleanArchivePath(".//./opt") == "opt");
  CHECK(CleanArchivePath("./") == "");
  CHECK(CleanArchivePath(".") == "");
  CHECK(CleanArchivePath("a/../b") == "a/../b");  // judged by the caller's policy, not here
}

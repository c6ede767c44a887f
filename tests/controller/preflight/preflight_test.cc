// Preflight's pure parts: the image's merged tree (layers, whiteouts) and what the Module
// needs of it for a kernel.
#include <catch2/catch.hpp>

#include <string>

#include "controller/preflight/preflight.h"

namespace kmodd::preflight {
namespace {

constexpr char kKernel[] = "6.1.0-27-cloud-amd64";

ImageFile Ko(const std::string& name, const std::string& release, std::vector<std::string> depends = {},
             bool is_signed = false) {
  ModInfo info;
  info.name = name;
  info.vermagic = release + " SMP preempt mod_unload modversions ";
  info.depends = std::move(depends);
  info.has_signature = is_signed;
  ImageFile f;
  f.modinfo = absl::StatusOr<ModInfo>(info);
  return f;
}

ImageTree GoodTree() {
  const std::string dir = std::string("opt/lib/modules/") + kKernel;
  ImageTree t;
  t[dir] = ImageFile{image::TarType::kDirectory, 0, std::nullopt};
  t[dir + "/extra/kmm_ci_a.ko"] = Ko("kmm_ci_a", kKernel, {"kmm_ci_dep_base", "crc32c"});
  t[dir + "/extra/kmm_ci_dep_base.ko"] = Ko("kmm_ci_dep_base", kKernel);
  t[dir + "/modules.dep"] = ImageFile{};
  t["firmware/kmm_ci.bin"] = ImageFile{};
  return t;
}

Expectations Want() {
  Expectations w;
  w.kernel = kKernel;
  w.module_name = "kmm-ci-a";
  w.loading_order = {"kmm_ci_a", "kmm_ci_dep_base"};
  w.firmware_path = "/firmware";
  return w;
}

TEST_CASE("preflight content: a tree that holds the Module's driver for the kernel passes") {
  const ContentVerdict v = CheckContent(Want(), GoodTree());
  INFO(v.reason);
  CHECK(v.ok);
  REQUIRE(v.notes.size() == 3);
  CHECK(v.notes[0] == "2 modules in /opt/lib/modules/6.1.0-27-cloud-amd64/: kmm_ci_a, kmm_ci_dep_base");
  CHECK(v.notes[1] == "from the kernel's own modules: crc32c (not checked: no module tree of the kernel was given)");
  CHECK(v.notes[2] == "firmwarePath /firmware is there");
}

TEST_CASE("preflight content: each broken tree is a Failure naming the file and what was found") {
  const std::string dir = std::string("opt/lib/modules/") + kKernel;
  struct Case {
    std::string name;
    std::function<void(ImageTree&, Expectations&)> change;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"no directory for the kernel",
       [&](ImageTree& t, Expectations&) {
         ImageTree other;
         other["opt/lib/modules/6.1.0-26-cloud-amd64/a.ko"] = Ko("a", "6.1.0-26-cloud-amd64");
         t = other;
       },
       "the image has no /opt/lib/modules/6.1.0-27-cloud-amd64/ (it has /opt/lib/modules/ for "
       "6.1.0-26-cloud-amd64): it was not built for kernel 6.1.0-27-cloud-amd64"},
      {"an empty image", [](ImageTree& t, Expectations&) { t.clear(); },
       "(nor any /opt/lib/modules/)"},
      {"another dirName", [](ImageTree&, Expectations& w) { w.dir_name = "/usr"; },
       "the image has no /usr/lib/modules/6.1.0-27-cloud-amd64/"},
      {"wrong vermagic",
       [&](ImageTree& t, Expectations&) { t[dir + "/extra/kmm_ci_a.ko"] = Ko("kmm_ci_a", "6.1.0-26-cloud-amd64", {"kmm_ci_dep_base"}); },
       "/opt/lib/modules/6.1.0-27-cloud-amd64/extra/kmm_ci_a.ko: its vermagic \"6.1.0-26-cloud-amd64 SMP "
       "preempt mod_unload modversions \" is for kernel 6.1.0-26-cloud-amd64, not 6.1.0-27-cloud-amd64"},
      {"vermagic flags other than the kernel's",
       [](ImageTree&, Expectations& w) { w.kernel_vermagic = std::string(kKernel) + " SMP mod_unload "; },
       "extra/kmm_ci_a.ko: its vermagic \"6.1.0-27-cloud-amd64 SMP preempt mod_unload modversions \" "
       "differs from kernel 6.1.0-27-cloud-amd64's \"6.1.0-27-cloud-amd64 SMP mod_unload \""},
      {"moduleName missing", [](ImageTree&, Expectations& w) { w.module_name = "kmm_ci_b"; },
       "moduleName kmm_ci_b is not in /opt/lib/modules/6.1.0-27-cloud-amd64/"},
      {"a modulesLoadingOrder module missing",
       [&](ImageTree& t, Expectations& w) {
         t.erase(dir + "/extra/kmm_ci_dep_base.ko");
         w.kernel_modules = std::set<std::string>{"crc32c", "kmm_ci_dep_base"};
       },
       "modulesLoadingOrder module kmm_ci_dep_base is not in /opt/lib/modules/6.1.0-27-cloud-amd64/"},
      {"a dependency in neither the image nor the kernel",
       [](ImageTree&, Expectations& w) { w.kernel_modules = std::set<std::string>{"ext4"}; },
       "kmm_ci_a depends on crc32c, which neither the image nor kernel 6.1.0-27-cloud-amd64's own modules hold"},
      {"firmwarePath missing", [](ImageTree& t, Expectations&) { t.erase("firmware/kmm_ci.bin"); },
       "firmwarePath /firmware is not in the image"},
      {"unsigned with sign", [](ImageTree&, Expectations& w) { w.signed_required = true; },
       "/opt/lib/modules/6.1.0-27-cloud-amd64/extra/kmm_ci_a.ko is not signed, and the Module signs (sign)"},
      {"an unreadable module",
       [&](ImageTree& t, Expectations&) {
         t[dir + "/extra/junk.ko"].modinfo = absl::StatusOr<ModInfo>(absl::InvalidArgumentError("not an ELF file"));
       },
       "/opt/lib/modules/6.1.0-27-cloud-amd64/extra/junk.ko: not an ELF file"},
      {"two files for one module",
       [&](ImageTree& t, Expectations&) { t[dir + "/updates/kmm-ci-a.ko"] = Ko("", kKernel); },
       "two files for module kmm_ci_a"},
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      ImageTree t = GoodTree();
      Expectations w = Want();
      c.change(t, w);
      const ContentVerdict v = CheckContent(w, t);
      CHECK_FALSE(v.ok);
      CHECK_THAT(v.reason, Catch::Contains(c.reason));
    }
  }
}

TEST_CASE("preflight content: a dependency found in the kernel's own tree is noted as checked") {
  Expectations w = Want();
  w.kernel_modules = KernelModuleNames("kernel/lib/libcrc32c.ko: \nkernel/arch/x86/crypto/crc32c-intel.ko:\n",
                                       "kernel/fs/ext4/ext4.ko\n");
  CHECK(w.kernel_modules->count("crc32c_intel") == 1);
  CHECK(w.kernel_modules->count("ext4") == 1);
  w.kernel_modules->insert("crc32c");
  const ContentVerdict v = CheckContent(w, GoodTree());
  CHECK(v.ok);
  CHECK(v.notes[1] == "from the kernel's own modules: crc32c (found in its tree)");
}

// Feeds entries to a TreeBuilder as a tar reader would.
void Add(TreeBuilder& b, const std::string& path, image::TarType type = image::TarType::kRegular,
         const std::string& data = "") {
  image::TarEntry e;
  e.path = path;
  e.type = type;
  e.size = data.size();
  REQUIRE(b.OnEntry(e).ok());
  REQUIRE(b.OnData(data.data(), data.size()).ok());
  REQUIRE(b.OnEntryEnd().ok());
}

TEST_CASE("preflight tree: layers merge in order, whiteouts and opaque directories remove lower files") {
  TreeBuilder b("opt/lib/modules/K/", 1 << 20);
  b.StartLayer();
  Add(b, "./opt/", image::TarType::kDirectory);
  Add(b, "opt/lib/modules/K/a.ko", image::TarType::kRegular, "not elf");
  Add(b, "opt/lib/modules/K/gone.ko");
  Add(b, "opt/old/x");
  Add(b, "opt/old/y");
  Add(b, "firmware/f.bin");
  b.StartLayer();
  Add(b, "opt/lib/modules/K/.wh.gone.ko");
  Add(b, "opt/old/z");
  Add(b, "opt/old/.wh..wh..opq");
  Add(b, "/firmware", image::TarType::kRegular);  // a file replaces the directory
  const ImageTree t = b.Take();
  CHECK(t.count("opt") == 1);
  REQUIRE(t.count("opt/lib/modules/K/a.ko") == 1);
  REQUIRE(t.at("opt/lib/modules/K/a.ko").modinfo.has_value());
  CHECK_FALSE(t.at("opt/lib/modules/K/a.ko").modinfo->ok());  // read, and refused
  CHECK(t.count("opt/lib/modules/K/gone.ko") == 0);
  CHECK(t.count("opt/lib/modules/K/.wh.gone.ko") == 0);
  CHECK(t.count("opt/old/x") == 0);
  CHECK(t.count("opt/old/y") == 0);
  CHECK(t.count("opt/old/z") == 1);  // the opaque layer's own file stays
  CHECK(t.count("firmware/f.bin") == 0);
  CHECK(t.count("firmware") == 1);
}

TEST_CASE("preflight tree: a module over the size limit is not read, and says so") {
  TreeBuilder b("opt/lib/modules/K/", 4);
  b.StartLayer();
  Add(b, "opt/lib/modules/K/big.ko", image::TarType::kRegular, "0123456789");
  Add(b, "opt/lib/modules/K/c.ko.xz", image::TarType::kRegular, "xz");
  Add(b, "elsewhere/not-read.ko", image::TarType::kRegular, "0123456789");
  const ImageTree t = b.Take();
  CHECK_THAT(std::string(t.at("opt/lib/modules/K/big.ko").modinfo->status().message()),
             Catch::Contains("larger than 4 bytes"));
  CHECK_THAT(std::string(t.at("opt/lib/modules/K/c.ko.xz").modinfo->status().message()),
             Catch::Contains("compressed module"));
  CHECK_FALSE(t.at("elsewhere/not-read.ko").modinfo.has_value());
}

}  // namespace
}  // namespace kmodd::preflight

namespace kmodd::preflight {
namespace {

TEST_CASE("preflight tree: a recorded layer replays to the same tree, .modinfo verdicts included") {
  auto feed = [](TreeBuilder& b, TreeBuilder::LayerRecord* rec1, TreeBuilder::LayerRecord* rec2) {
    b.StartLayer(rec1);
    Add(b, "opt/lib/modules/K/a.ko", image::TarType::kRegular, "not elf");
    Add(b, "opt/lib/modules/K/old.ko", image::TarType::kRegular, "x");
    Add(b, "etc/x");
    b.StartLayer(rec2);
    Add(b, "opt/lib/modules/K/.wh.old.ko");
    Add(b, "opt/lib/modules/K/big.ko", image::TarType::kRegular, std::string(100, 'b'));
  };
  TreeBuilder::LayerRecord first;
  TreeBuilder::LayerRecord second;
  TreeBuilder direct("opt/lib/modules/K/", 50);
  feed(direct, &first, &second);
  const ImageTree want = direct.Take();
  TreeBuilder replayed("opt/lib/modules/K/", 50);
  replayed.Replay(first);
  replayed.Replay(second);
  const ImageTree got = replayed.Take();
  REQUIRE(got.size() == want.size());
  for (const auto& [path, f] : want) {
    INFO(path);
    REQUIRE(got.count(path) == 1);
    CHECK(got.at(path).modinfo.has_value() == f.modinfo.has_value());
    if (f.modinfo) {
      CHECK(got.at(path).modinfo->status() == f.modinfo->status());
    }
  }
  CHECK(got.count("opt/lib/modules/K/old.ko") == 0);
  CHECK(got.at("opt/lib/modules/K/big.ko").modinfo->status().message() == "larger than 50 bytes: not read");
}

}  // namespace
}  // namespace kmodd::preflight

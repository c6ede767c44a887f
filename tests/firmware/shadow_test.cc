// Which staged firmware files shadow the host's own, on a temporary host root holding a fake
// firmware tree: the kernel's search order, its compressed passes, and where kmodd's
// directory sits in that order.

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "firmware/shadow.h"
#include "tests/temp_dir.h"

namespace fs = std::filesystem;
using kmodd::firmware::FindShadows;
using kmodd::firmware::FirmwareSearch;
using kmodd::firmware::KernelFirmwareDirs;
using kmodd::firmware::Shadow;

namespace {

constexpr char kRelease[] = "6.1.0-57-cloud-amd64";

struct HostRoot {
  kmodd::testing::TempDir tmp{"shadow-test"};
  std::string root = tmp.path;

  // A file at the host path `host_path` (e.g. /lib/firmware/x.bin).
  void Put(const std::string& host_path) {
    const std::string local = root + host_path;
    fs::create_directories(fs::path(local).parent_path());
    std::ofstream(local) << "firmware";
  }
  FirmwareSearch Search(const std::string& class_path) const {
    return FirmwareSearch{root, class_path, kRelease};
  }
  std::string Local(const std::string& host_path) const { return root + host_path; }
};

std::vector<std::string> HostFiles(const std::vector<Shadow>& shadows) {
  std::vector<std::string> out;
  for (const auto& s : shadows) {
    out.push_back(s.path + " -> " + s.host_file);
  }
  return out;
}

constexpr char kStaging[] = "/var/lib/kmodd/firmware";

}  // namespace

TEST_CASE("the kernel's firmware search order: firmware_class.path, then updates, then the tree") {
  CHECK(KernelFirmwareDirs(FirmwareSearch{"/", "/var/lib/kmodd/firmware", kRelease}) ==
        std::vector<std::string>{"/var/lib/kmodd/firmware",
                                 std::string("/lib/firmware/updates/") + kRelease,
                                 "/lib/firmware/updates", std::string("/lib/firmware/") + kRelease,
                                 "/lib/firmware"});
  CHECK(KernelFirmwareDirs(FirmwareSearch{"/", "", kRelease}).size() == 4);
}

TEST_CASE("a staged file shadows the host's file of the same name, the first the kernel would load") {
  HostRoot h;
  h.Put(std::string(kStaging) + "/kmm_ci_fw/fw.bin");
  h.Put(std::string(kStaging) + "/vendor/new.bin");
  h.Put("/lib/firmware/kmm_ci_fw/fw.bin");
  h.Put(std::string("/lib/firmware/updates/") + kRelease + "/kmm_ci_fw/fw.bin");
  const auto found = FindShadows(h.Search(kStaging), h.Local(kStaging),
                                 {"kmm_ci_fw/fw.bin", "vendor/new.bin"});
  REQUIRE(found.size() == 1);
  CHECK(found[0].path == "kmm_ci_fw/fw.bin");
  CHECK(found[0].staged == h.Local(kStaging) + "/kmm_ci_fw/fw.bin");
  CHECK(found[0].host_file == std::string("/lib/firmware/updates/") + kRelease + "/kmm_ci_fw/fw.bin");
}

TEST_CASE("shadowing follows the kernel's passes: plain names first, then .zst, then .xz") {
  HostRoot h;
  h.Put("/lib/firmware/plain-over-zst.bin.zst");  // the host compresses; kmodd stages plain
  h.Put(std::string(kStaging) + "/plain-over-zst.bin");
  h.Put("/lib/firmware/xz-under-plain.bin");  // the host's plain file wins over a staged .xz
  h.Put(std::string(kStaging) + "/xz-under-plain.bin.xz");
  h.Put("/lib/firmware/xz-over-xz.bin.xz");
  h.Put(std::string(kStaging) + "/xz-over-xz.bin.xz");
  const auto found = FindShadows(h.Search(kStaging), h.Local(kStaging),
                                 {"plain-over-zst.bin", "xz-under-plain.bin.xz", "xz-over-xz.bin.xz"});
  CHECK(HostFiles(found) ==
        std::vector<std::string>{"plain-over-zst.bin -> /lib/firmware/plain-over-zst.bin.zst",
                                 "xz-over-xz.bin.xz -> /lib/firmware/xz-over-xz.bin.xz"});
}

TEST_CASE("where kmodd's directory sits in the kernel's order decides what it shadows") {
  HostRoot h;
  h.Put("/lib/firmware/a.bin");
  h.Put("/lib/firmware/updates/a.bin");
  h.Put(std::string(kStaging) + "/a.bin");

  SECTION("not searched at all (firmware_class.path unset): the kernel never sees it") {
    CHECK(FindShadows(h.Search(""), h.Local(kStaging), {"a.bin"}).empty());
  }
  SECTION("firmware_class.path names another directory: not searched either") {
    h.Put("/custom/fw/other.bin");
    CHECK(FindShadows(h.Search("/custom/fw"), h.Local(kStaging), {"a.bin"}).empty());
  }
  SECTION("kmodd stages into /lib/firmware/updates: it shadows /lib/firmware only") {
    const auto found =
        FindShadows(h.Search(""), h.Local("/lib/firmware/updates"), {"a.bin"});
    CHECK(HostFiles(found) == std::vector<std::string>{"a.bin -> /lib/firmware/a.bin"});
  }
  SECTION("kmodd stages into /lib/firmware itself: nothing comes after it") {
    CHECK(FindShadows(h.Search(""), h.Local("/lib/firmware"), {"a.bin"}).empty());
  }
}

TEST_CASE("only a regular file is shadowed, through symlinks as the kernel opens it") {
  HostRoot h;
  for (const char* name : {"dir.bin", "dangling.bin", "link.bin", "absent.bin"}) {
    h.Put(std::string(kStaging) + "/" + name);
  }
  fs::create_directories(h.Local("/lib/firmware/dir.bin"));
  fs::create_symlink("nowhere.bin", h.Local("/lib/firmware/dangling.bin"));
  h.Put("/lib/firmware/real.bin");
  fs::create_symlink("real.bin", h.Local("/lib/firmware/link.bin"));
  const auto found = FindShadows(h.Search(kStaging), h.Local(kStaging),
                                 {"dir.bin", "dangling.bin", "link.bin", "absent.bin"});
  CHECK(HostFiles(found) == std::vector<std::string>{"link.bin -> /lib/firmware/link.bin"});
}

TEST_CASE("firmware_class.path is read without the newline sysfs adds; unreadable is unset") {
  HostRoot h;
  std::ofstream(h.root + "/path") << "/var/lib/kmodd/firmware\n";
  CHECK(kmodd::firmware::ReadClassPath(h.root + "/path") == "/var/lib/kmodd/firmware");
  CHECK(kmodd::firmware::ReadClassPath(h.root + "/missing").empty());
}

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "node-agent/kernel/procfs.h"
#include "tests/temp_dir.h"

namespace fs = std::filesystem;
using kmodd::kernel::LoadedModule;
using kmodd::kernel::ParseProcModules;

namespace {

void Write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("/proc/modules lines give state, refcount, holders and taint") {
  auto mods = ParseProcModules(
      "kmm_ci_dep_base 16384 1 kmm_ci_dep_user, Live 0xffffffffc0524000 (OE)\n"
      "dummy 16384 0 - Loading 0xffffffffc0600000\n"
      "kmm_ci_dep_user 16384 0 - Unloading 0x0000000000000000 (OE)\n"
      "ext4 819200 2 - Live 0xffffffffc1000000\n");
  REQUIRE(mods.ok());
  REQUIRE(mods->size() == 4);
  const LoadedModule& dummy = (*mods)[0];
  CHECK(dummy.name == "dummy");
  CHECK(dummy.state == LoadedModule::State::kComing);
  CHECK_FALSE(dummy.OutOfTree());
  const LoadedModule& base = (*mods)[2];
  CHECK(base.name == "kmm_ci_dep_base");
  CHECK(base.refcount == 1);
  CHECK(base.holders == std::vector<std::string>{"kmm_ci_dep_user"});
  CHECK(base.taint == "OE");
  CHECK(base.OutOfTree());
  CHECK(base.InUse());
  CHECK((*mods)[3].state == LoadedModule::State::kGoing);
}

TEST_CASE("a malformed /proc/modules is an error, never an empty list") {
  CHECK_FALSE(ParseProcModules("dummy 16384\n").ok());
  CHECK_FALSE(ParseProcModules("dummy 16384 0 - Sleeping 0x0\n").ok());
  auto empty = ParseProcModules("");
  REQUIRE(empty.ok());  // a kernel with no modules loaded is a real, empty state
  CHECK(empty->empty());
}

TEST_CASE("kernel state reads release, boot id, taint and sysfs attributes") {
  const kmodd::testing::TempDir tmp("procfs");
  const std::string& root = tmp.path;
  kmodd::kernel::ProcRoots roots{root + "/proc", root + "/sys"};
  Write(roots.proc + "/sys/kernel/osrelease", "6.1.0-57-cloud-amd64\n");
  Write(roots.proc + "/sys/kernel/random/boot_id", "abf1d460-b46f\n");
  Write(roots.proc + "/sys/kernel/tainted", "12288\n");
  Write(roots.proc + "/modules", "kmm_ci_a 16384 0 - Live 0x0 (OE)\n");
  Write(roots.sys + "/module/kmm_ci_a/version", "1.0\n");
  Write(roots.sys + "/module/kmm_ci_a/srcversion", "ABCDEF\n");
  Write(roots.sys + "/module/kmm_ci_a/parameters/greeting", "hi\n");
  auto ks = kmodd::kernel::ReadKernelState(roots);
  REQUIRE(ks.ok());
  CHECK(ks->release == "6.1.0-57-cloud-amd64");
  CHECK(ks->boot_id == "abf1d460-b46f");
  CHECK(ks->taint == 12288);
  REQUIRE(ks->modules.size() == 1);
  CHECK(ks->modules[0].version == "1.0");
  CHECK(ks->modules[0].srcversion == "ABCDEF");
  CHECK(ks->modules[0].parameters.at("greeting") == "hi");
  CHECK(ks->Find("kmm-ci-a") != nullptr);  // '-' and '_' are the same to the kernel
  // Unreadable /proc/modules: an error naming the file.
  fs::remove(roots.proc + "/modules");
  auto broken = kmodd::kernel::ReadKernelState(roots);
  REQUIRE_FALSE(broken.ok());
  CHECK(std::string(broken.status().message()).find("/proc/modules") != std::string::npos);
}

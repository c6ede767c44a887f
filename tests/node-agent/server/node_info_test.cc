#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "node-agent/server/node_info.h"
#include "server_rig.h"

using kmodd::agent::GoArch;
using kmodd::agent::ParseLockdown;
using kmodd::agent::ParseOsRelease;
using kmodd::agent::ParseSigEnforce;

TEST_CASE("lockdown is the bracketed word of the securityfs file", "[server]") {
  CHECK(ParseLockdown("none [integrity] confidentiality\n") == "integrity");
  CHECK(ParseLockdown("[none] integrity confidentiality") == "none");
  CHECK(ParseLockdown("none integrity [confidentiality]") == "confidentiality");
  CHECK(ParseLockdown("").empty());
  CHECK(ParseLockdown("none integrity").empty());
}

TEST_CASE("signature enforcement is on only for Y", "[server]") {
  CHECK(ParseSigEnforce("Y\n"));
  CHECK_FALSE(ParseSigEnforce("N\n"));
  CHECK_FALSE(ParseSigEnforce(""));
}

TEST_CASE("architecture uses GOARCH spelling", "[server]") {
  CHECK(GoArch("x86_64") == "amd64");
  CHECK(GoArch("aarch64") == "arm64");
  CHECK(GoArch("i686") == "386");
  CHECK(GoArch("s390x") == "s390x");
}

TEST_CASE("the OS image is os-release's PRETTY_NAME unquoted", "[server]") {
  CHECK(ParseOsRelease("NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n") ==
        "Debian GNU/Linux 12 (bookworm)");
  CHECK(ParseOsRelease("PRETTY_NAME=Plain\n") == "Plain");
  CHECK(ParseOsRelease("NAME=x\n").empty());
}

TEST_CASE("node facts are read from the system files, unknown ones left empty", "[server]") {
  kmodd::testing::TempDir t{"server"};
  auto write = [&](const std::string& rel, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(t.path + rel).parent_path());
    std::ofstream(t.path + rel) << text;
  };
  write("/proc/sys/kernel/random/boot_id", "b00t\n");
  write("/sys/module/module/parameters/sig_enforce", "Y\n");
  write("/etc/os-release", "PRETTY_NAME=\"Test OS\"\n");
  kmodd::agent::NodeFactsSources src;
  src.root = t.path;
  src.release = "6.1.0-test";
  src.machine = "aarch64";
  const auto f = kmodd::agent::ReadNodeFacts("node-a", {{"zone", "a"}}, src);
  CHECK(f.name == "node-a");
  CHECK(f.labels.at("zone") == "a");
  CHECK(f.kernel_release == "6.1.0-test");
  CHECK(f.architecture == "arm64");
  CHECK(f.boot_id == "b00t");
  CHECK(f.module_sig_enforce);
  CHECK(f.lockdown.empty());  // no securityfs file: unknown
  CHECK(f.os_image == "Test OS");
}

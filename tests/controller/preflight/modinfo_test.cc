// .modinfo read from a module's bytes: a minimal ELF64 built here, then broken one field at
// a time (a driver image's .ko is untrusted input).
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "controller/preflight/modinfo.h"
#include "controller/sign/module_signer.h"

namespace kmodd::preflight {
namespace {

void PutLe(std::string& s, size_t at, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  }
}

// ELF64 LE: header, .shstrtab, .modinfo, then the section table (null, .shstrtab, .modinfo).
std::string Elf(const std::string& modinfo) {
  const std::string names = std::string("\0.shstrtab\0.modinfo\0", 20);
  std::string s(64, '\0');
  s.replace(0, 4, "\x7f" "ELF");
  s[4] = 2;  // ELFCLASS64
  s[5] = 1;  // little-endian
  s[6] = 1;
  PutLe(s, 0x10, 1, 2);   // ET_REL
  PutLe(s, 0x12, 62, 2);  // x86_64
  const size_t names_at = s.size();
  s += names;
  const size_t info_at = s.size();
  s += modinfo;
  while (s.size() % 8 != 0) {
    s += '\0';
  }
  const size_t shoff = s.size();
  s += std::string(3 * 64, '\0');
  auto section = [&](size_t i, uint32_t name, uint32_t type, size_t off, size_t size) {
    const size_t at = shoff + i * 64;
    PutLe(s, at, name, 4);
    PutLe(s, at + 4, type, 4);
    PutLe(s, at + 0x18, off, 8);
    PutLe(s, at + 0x20, size, 8);
  };
  section(1, 1, 3, names_at, names.size());         // .shstrtab, SHT_STRTAB
  section(2, 11, 1, info_at, modinfo.size());        // .modinfo, SHT_PROGBITS
  PutLe(s, 0x28, shoff, 8);
  PutLe(s, 0x3A, 64, 2);
  PutLe(s, 0x3C, 3, 2);
  PutLe(s, 0x3E, 1, 2);
  return s;
}

const std::string kInfo = std::string(
    "license=GPL\0depends=kmm_ci_dep_base,,crc32c\0name=kmm_ci_a\0"
    "vermagic=6.1.0-27-cloud-amd64 SMP preempt mod_unload modversions \0", 120);

TEST_CASE("modinfo: name, vermagic and depends of a module, signed or not") {
  const std::string ko = Elf(kInfo);
  auto info = ReadModInfo(ko);
  REQUIRE(info.ok());
  CHECK(info->name == "kmm_ci_a");
  CHECK(info->Release() == "6.1.0-27-cloud-amd64");
  CHECK(info->depends == std::vector<std::string>{"kmm_ci_dep_base", "crc32c"});
  CHECK_FALSE(info->has_signature);
  // A signature trailer: read through it (a signed module's ELF is the same bytes).
  std::string sig = "CMS-bytes";
  std::string trailer(12, '\0');
  trailer[2] = 2;                               // id_type: PKCS#7
  trailer[11] = static_cast<char>(sig.size());  // sig_len, big-endian
  const std::string signed_ko = ko + sig + trailer + std::string(sign::kModuleSignatureMagic);
  auto s = ReadModInfo(signed_ko);
  REQUIRE(s.ok());
  CHECK(s->has_signature);
  CHECK(s->name == "kmm_ci_a");
}

TEST_CASE("modinfo: hostile module files are refused naming what is wrong") {
  const std::string good = Elf(kInfo);
  const size_t shoff = good.size() - 3 * 64;
  struct Case {
    std::string name;
    std::string bytes;
    std::string message;
  };
  auto with = [&](size_t at, uint64_t v, size_t n) {
    std::string s = good;
    PutLe(s, at, v, n);
    return s;
  };
  const std::vector<Case> cases = {
      {"empty", "", "not an ELF file"},
      {"a shell script", "#!/bin/sh\nrm -rf /\n" + std::string(64, ' '), "not an ELF file"},
      {"truncated header", good.substr(0, 40), "not an ELF file"},
      {"32-bit", with(4, 1, 1), "not a 64-bit little-endian"},
      {"big-endian", with(5, 2, 1), "not a 64-bit little-endian"},
      {"section table past the end", with(0x28, good.size(), 8), "section table"},
      {"section table offset overflows", with(0x28, ~uint64_t{0} - 10, 8), "section table"},
      {"no sections", with(0x3C, 0, 2), "section table"},
      {"entry size too small", with(0x3A, 8, 2), "section table"},
      {"name table index past the sections", with(0x3E, 7, 2), "section name table index 7"},
      {"name table past the end", with(shoff + 64 + 0x18, good.size() + 1, 8), "section name table"},
      {".modinfo size past the end", with(shoff + 128 + 0x20, 1 << 30, 8), ".modinfo section"},
      {".modinfo offset overflows", with(shoff + 128 + 0x18, ~uint64_t{0}, 8), ".modinfo section"},
      {".modinfo is NOBITS", with(shoff + 128 + 4, 8, 4), ".modinfo section"},
      {"no .modinfo (renamed)", with(shoff + 128, 2, 4), "no .modinfo section"},
      {"name offset past the table", with(shoff + 128, 4000, 4), "no .modinfo section"},
      {"truncated section table", good.substr(0, good.size() - 10), "section table"},
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      auto info = ReadModInfo(c.bytes);
      REQUIRE_FALSE(info.ok());
      CHECK_THAT(std::string(info.status().message()), Catch::Contains(c.message));
    }
  }
}

TEST_CASE("modinfo: a .modinfo without the usual fields reads as empty, not as an error") {
  auto info = ReadModInfo(Elf(std::string("junk\0=\0vermagic=\0\0\0", 19)));
  REQUIRE(info.ok());
  CHECK(info->name.empty());
  CHECK(info->Release().empty());
  CHECK(info->depends.empty());
}

TEST_CASE("modinfo: module names from file names as kmod spells them") {
  CHECK(ModuleNameFromPath("opt/lib/modules/6.1/extra/kmm-ci-a.ko") == "kmm_ci_a");
  CHECK(ModuleNameFromPath("kernel/fs/ext4/ext4.ko.xz") == "ext4");
  CHECK(ModuleNameFromPath("a.ko.zst") == "a");
  CHECK(ModuleNameFromPath("noext") == "noext");
}

}  // namespace
}  // namespace kmodd::preflight

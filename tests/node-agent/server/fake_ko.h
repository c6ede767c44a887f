#pragma once

// Minimal kernel module files for tests: an ELF64 relocatable object holding only a
// .modinfo section, enough for libkmod's modinfo (DriverTree::Open) to index it. Nothing
// here can be inserted into a real kernel; FakeKernel only looks at the name.

#include <elf.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace kmodd::testing {

inline void WriteFakeKo(const std::string& path, const std::vector<std::string>& modinfo) {
  std::string info;
  for (const auto& kv : modinfo) {
    info += kv;
    info.push_back('\0');
  }
  const std::string shstrtab = std::string("\0.modinfo\0.shstrtab\0", 20);
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_REL;
  eh.e_machine = EM_X86_64;
  eh.e_version = EV_CURRENT;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = 3;
  eh.e_shstrndx = 2;
  const size_t info_off = sizeof(Elf64_Ehdr);
  const size_t str_off = info_off + info.size();
  size_t sh_off = str_off + shstrtab.size();
  sh_off = (sh_off + 7) & ~static_cast<size_t>(7);
  eh.e_shoff = sh_off;
  Elf64_Shdr sh[3]{};
  sh[1].sh_name = 1;
  sh[1].sh_type = SHT_PROGBITS;
  sh[1].sh_flags = SHF_ALLOC;
  sh[1].sh_offset = info_off;
  sh[1].sh_size = info.size();
  sh[1].sh_addralign = 1;
  sh[2].sh_name = 10;
  sh[2].sh_type = SHT_STRTAB;
  sh[2].sh_offset = str_off;
  sh[2].sh_size = shstrtab.size();
  sh[2].sh_addralign = 1;
  std::string out(reinterpret_cast<const char*>(&eh), sizeof eh);
  out += info;
  out += shstrtab;
  out.resize(sh_off, '\0');
  out.append(reinterpret_cast<const char*>(sh), sizeof sh);
  std::ofstream(path, std::ios::binary) << out;
}

}  // namespace kmodd::testing

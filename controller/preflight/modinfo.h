#pragma once

// A kernel module's .modinfo section, read from the bytes of a .ko (an ELF64 relocatable
// object) without libkmod: the controller checks images it does not unpack onto a disk.
// Only what preflight needs: name, vermagic, depends, and the signature trailer.
//
// The bytes are untrusted (a driver image's content): every offset and size is checked
// against the data, and a malformed file is an error naming what is wrong, never a crash.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kmodd::preflight {

struct ModInfo {
  std::string name;      // the `name=` field (modpost writes it since Linux 5.3), may be ""
  std::string vermagic;  // "6.1.0-27-cloud-amd64 SMP preempt mod_unload modversions"
  std::vector<std::string> depends;  // `depends=`, split on ',', empty names dropped
  bool has_signature = false;        // ends with the module signature trailer

  // The kernel release the module was built for: vermagic's first word.
  std::string_view Release() const;
};

// Reads `ko` (a module file's bytes, signed or not). Refused: not ELF, not 64-bit
// little-endian, a section table or string table out of the file, no .modinfo section.
[[nodiscard]] absl::StatusOr<ModInfo> ReadModInfo(std::string_view ko);

// The module name from a file name, as the kernel and kmod spell it: the base name without
// ".ko" (and a compression suffix), '-' read as '_'.
std::string ModuleNameFromPath(std::string_view path);

}  // namespace kmodd::preflight

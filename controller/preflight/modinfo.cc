#include "controller/preflight/modinfo.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "controller/sign/module_signer.h"

namespace kmodd::preflight {

namespace {

// ELF64 offsets (elf(5)).
constexpr size_t kEhdrSize = 64;
constexpr size_t kShOff = 0x28, kShEntSize = 0x3A, kShNum = 0x3C, kShStrNdx = 0x3E;
constexpr size_t kShdrSize = 64;
constexpr size_t kShName = 0, kShOffset = 0x18, kShSize = 0x20;
constexpr uint32_t kShtNobits = 8;

template <typename T>
T Le(std::string_view d, size_t at) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    v |= static_cast<T>(static_cast<T>(static_cast<unsigned char>(d[at + i])) << (8 * i));
  }
  return v;
}

// The non-empty pieces of `s` between `sep`s (this Abseil's StrSplit takes no std::string_view).
std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (!s.empty()) {
    const size_t at = s.find(sep);
    if (at != 0) {
      out.push_back(s.substr(0, at));
    }
    if (at == std::string_view::npos) {
      break;
    }
    s.remove_prefix(at + 1);
  }
  return out;
}

// [offset, offset + size) inside a file of `total` bytes, without overflow.
bool Within(uint64_t offset, uint64_t size, uint64_t total) {
  return offset <= total && size <= total - offset;
}

}  // namespace

std::string_view ModInfo::Release() const {
  std::string_view v = vermagic;
  return v.substr(0, v.find(' '));
}

absl::StatusOr<ModInfo> ReadModInfo(std::string_view ko) {
  ModInfo info;
  info.has_signature = sign::IsSigned(ko);
  absl::StatusOr<std::string_view> body = sign::StripSignature(ko);
  if (!body.ok()) {
    return body.status();
  }
  const std::string_view d = *body;
  if (d.size() < kEhdrSize || d.substr(0, 4) != std::string_view("\x7f" "ELF", 4)) {
    return absl::InvalidArgumentError("not an ELF file (a kernel module is one)");
  }
  if (d[4] != 2 || d[5] != 1) {
    return absl::InvalidArgumentError(
        "not a 64-bit little-endian ELF file: kmodd checks modules for x86_64 and arm64");
  }
  const uint64_t shoff = Le<uint64_t>(d, kShOff);
  const uint16_t shentsize = Le<uint16_t>(d, kShEntSize);
  const uint16_t shnum = Le<uint16_t>(d, kShNum);
  const uint16_t shstrndx = Le<uint16_t>(d, kShStrNdx);
  if (shnum == 0 || shentsize < kShdrSize ||
      !Within(shoff, uint64_t{shnum} * shentsize, d.size())) {
    return absl::InvalidArgumentError(absl::StrCat("its section table (", shnum, " entries at offset ",
                                                   shoff, ") is not inside the file"));
  }
  if (shstrndx >= shnum) {
    return absl::InvalidArgumentError(
        absl::StrCat("its section name table index ", shstrndx, " is past ", shnum, " sections"));
  }
  auto section = [&](uint16_t i) { return static_cast<size_t>(shoff + uint64_t{i} * shentsize); };
  const size_t names_at = section(shstrndx);
  const uint64_t names_off = Le<uint64_t>(d, names_at + kShOffset);
  const uint64_t names_size = Le<uint64_t>(d, names_at + kShSize);
  if (!Within(names_off, names_size, d.size())) {
    return absl::InvalidArgumentError("its section name table is not inside the file");
  }
  const std::string_view names = d.substr(names_off, names_size);
  std::string_view modinfo;
  bool found = false;
  for (uint16_t i = 0; i < shnum && !found; ++i) {
    const size_t at = section(i);
    const uint32_t name = Le<uint32_t>(d, at + kShName);
    if (name >= names.size()) {
      continue;
    }
    const std::string_view rest = names.substr(name);
    if (rest.substr(0, rest.find('\0')) != ".modinfo") {
      continue;
    }
    const uint64_t off = Le<uint64_t>(d, at + kShOffset);
    const uint64_t size = Le<uint64_t>(d, at + kShSize);
    if (Le<uint32_t>(d, at + 4) == kShtNobits || !Within(off, size, d.size())) {
      return absl::InvalidArgumentError("its .modinfo section is not inside the file");
    }
    modinfo = d.substr(off, size);
    found = true;
  }
  if (!found) {
    return absl::InvalidArgumentError("no .modinfo section: not a kernel module");
  }
  for (std::string_view field : Split(modinfo, '\0')) {
    const size_t eq = field.find('=');
    if (eq == std::string_view::npos) {
      continue;
    }
    const std::string_view key = field.substr(0, eq);
    const std::string_view value = field.substr(eq + 1);
    if (key == "name") {
      info.name = std::string(value);
    } else if (key == "vermagic") {
      info.vermagic = std::string(value);
    } else if (key == "depends") {
      for (std::string_view dep : Split(value, ',')) {
        info.depends.emplace_back(dep);
      }
    }
  }
  return info;
}

std::string ModuleNameFromPath(std::string_view path) {
  std::string_view base = path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1);
  for (std::string_view suffix : {".ko.xz", ".ko.zst", ".ko.gz", ".ko"}) {
    if (base.ends_with(suffix)) {
      base.remove_suffix(suffix.size());
      break;
    }
  }
  std::string name(base);
  for (char& c : name) {
    if (c == '-') {
      c = '_';
    }
  }
  return name;
}

}  // namespace kmodd::preflight

#include "node-agent/server/node_info.h"

#include <sys/utsname.h>

#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file.h"

namespace kmodd::agent {

std::string ParseLockdown(std::string_view text) {
  const size_t open = text.find('[');
  const size_t close = text.find(']', open == std::string_view::npos ? 0 : open);
  if (open == std::string_view::npos || close == std::string_view::npos) {
    return "";
  }
  return std::string(text.substr(open + 1, close - open - 1));
}

bool ParseSigEnforce(std::string_view text) {
  return absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size())) == "Y";
}

std::string GoArch(std::string_view machine) {
  static const std::map<std::string_view, std::string_view> kArch = {
      {"x86_64", "amd64"},   {"amd64", "amd64"},     {"aarch64", "arm64"}, {"arm64", "arm64"},
      {"i386", "386"},       {"i686", "386"},        {"armv7l", "arm"},    {"armv6l", "arm"},
      {"ppc64le", "ppc64le"}, {"s390x", "s390x"},    {"riscv64", "riscv64"}};
  auto it = kArch.find(machine);
  return it != kArch.end() ? std::string(it->second) : std::string(machine);
}

std::string ParseOsRelease(std::string_view text) {
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "PRETTY_NAME=")) {
      continue;
    }
    if (line.size() >= 2 && (line.front() == '"' || line.front() == '\'') &&
        line.back() == line.front()) {
      line = line.substr(1, line.size() - 2);
    }
    return std::string(line);
  }
  return "";
}

namespace {

std::string ReadTrimmed(const std::string& path) {
  auto text = ReadFile(path);
  return text.ok() ? std::string(absl::StripAsciiWhitespace(*text)) : std::string();
}

}  // namespace

NodeFacts ReadNodeFacts(const std::string& name, std::map<std::string, std::string> labels,
                        const NodeFactsSources& sources) {
  NodeFacts f;
  f.name = name;
  f.labels = std::move(labels);
  f.kernel_release = sources.release;
  std::string machine = sources.machine;
  if (f.kernel_release.empty() || machine.empty()) {
    struct utsname u {};
    if (uname(&u) == 0) {
      f.kernel_release = f.kernel_release.empty() ? u.release : f.kernel_release;
      machine = machine.empty() ? u.machine : machine;
    }
  }
  f.architecture = GoArch(machine);
  const std::string& r = sources.root;
  f.boot_id = ReadTrimmed(r + "/proc/sys/kernel/random/boot_id");
  f.lockdown = ParseLockdown(ReadTrimmed(r + "/sys/kernel/security/lockdown"));
  f.module_sig_enforce = ParseSigEnforce(ReadTrimmed(r + "/sys/module/module/parameters/sig_enforce"));
  auto os = ReadFile(r + "/etc/os-release");
  if (!os.ok()) {
    os = ReadFile(r + "/usr/lib/os-release");
  }
  f.os_image = os.ok() ? ParseOsRelease(*os) : "";
  return f;
}

}  // namespace kmodd::agent

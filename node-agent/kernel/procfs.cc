#include "node-agent/kernel/procfs.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/file.h"

namespace kmodd::kernel {

namespace fs = std::filesystem;

namespace {

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) {
    s.pop_back();
  }
  return s;
}

absl::StatusOr<std::string> ReadTrimmed(const std::string& path) {
  auto s = ReadFile(path);
  if (!s.ok()) {
    return s.status();
  }
  return Trimmed(std::move(*s));
}

// Optional sysfs attributes: absent for some modules (no MODULE_VERSION), never an error.
std::string ReadOptional(const std::string& path) {
  auto s = ReadTrimmed(path);
  return s.ok() ? *s : std::string();
}

void ReadParameters(const std::string& dir, LoadedModule& m) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    struct stat st {};
    const std::string path = entry.path().string();
    // Write-only parameters (mode 0200) cannot be read; they are not part of the state.
    if (stat(path.c_str(), &st) != 0 || (st.st_mode & S_IRUSR) == 0) {
      continue;
    }
    auto v = ReadTrimmed(path);
    if (v.ok()) {
      m.parameters[entry.path().filename().string()] = *v;
    }
  }
}

}  // namespace

absl::StatusOr<std::vector<LoadedModule>> ParseProcModules(std::string_view text) {
  std::vector<LoadedModule> out;
  std::istringstream in{std::string(text)};
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) {
      continue;
    }
    std::istringstream fields(line);
    LoadedModule m;
    std::string size;
    std::string holders;
    std::string state;
    std::string address;
    if (!(fields >> m.name >> size >> m.refcount >> holders >> state >> address)) {
      return absl::DataLossError(
          absl::StrCat("/proc/modules line ", lineno, " is malformed: \"", line, "\""));
    }
    if (state == "Live") {
      m.state = LoadedModule::State::kLive;
    } else if (state == "Loading") {
      m.state = LoadedModule::State::kComing;
    } else if (state == "Unloading") {
      m.state = LoadedModule::State::kGoing;
    } else {
      return absl::DataLossError(
          absl::StrCat("/proc/modules line ", lineno, ": unknown state \"", state, "\""));
    }
    if (holders != "-") {
      std::istringstream hs(holders);
      std::string h;
      while (std::getline(hs, h, ',')) {
        if (!h.empty()) {
          m.holders.push_back(h);
        }
      }
      std::sort(m.holders.begin(), m.holders.end());
    }
    std::string taint;
    if (fields >> taint && taint.size() >= 2 && taint.front() == '(' && taint.back() == ')') {
      m.taint = taint.substr(1, taint.size() - 2);
    }
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(),
            [](const LoadedModule& a, const LoadedModule& b) { return a.name < b.name; });
  return out;
}

absl::StatusOr<KernelState> ReadKernelState(const ProcRoots& roots) {
  KernelState ks;
  auto release = ReadTrimmed(roots.proc + "/sys/kernel/osrelease");
  if (!release.ok()) {
    return release.status();
  }
  ks.release = *release;
  auto boot_id = ReadTrimmed(roots.proc + "/sys/kernel/random/boot_id");
  if (!boot_id.ok()) {
    return boot_id.status();
  }
  ks.boot_id = *boot_id;
  auto taint = ReadTrimmed(roots.proc + "/sys/kernel/tainted");
  if (!taint.ok()) {
    return taint.status();
  }
  ks.taint = std::strtoull(taint->c_str(), nullptr, 10);
  auto text = ReadFile(roots.proc + "/modules");
  if (!text.ok()) {
    return text.status();
  }
  auto modules = ParseProcModules(*text);
  if (!modules.ok()) {
    return modules.status();
  }
  for (auto& m : *modules) {
    const std::string dir = absl::StrCat(roots.sys, "/module/", m.name);
    m.version = ReadOptional(dir + "/version");
    m.srcversion = ReadOptional(dir + "/srcversion");
    ReadParameters(dir + "/parameters", m);
  }
  ks.modules = std::move(*modules);
  return ks;
}

}  // namespace kmodd::kernel

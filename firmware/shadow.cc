#include "firmware/shadow.h"

#include <sys/stat.h>

#include <filesystem>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file.h"

namespace kmodd::firmware {

namespace {

namespace fs = std::filesystem;

// The kernel's passes: the plain name in every directory, then each compressed form.
constexpr const char* kSuffixes[] = {"", ".zst", ".xz"};
constexpr size_t kPasses = sizeof(kSuffixes) / sizeof(kSuffixes[0]);

struct Place {
  std::string host;   // the directory as the kernel names it
  std::string local;  // the same, as this process reaches it
  bool staging;       // kmodd's firmware directory
};

std::string Local(const std::string& host_root, const std::string& host_path) {
  std::string root = host_root;
  while (!root.empty() && root.back() == '/') {
    root.pop_back();
  }
  return root + host_path;
}

bool SameDir(const std::string& a, const std::string& b) {
  struct stat sa {};
  struct stat sb {};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0) {
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  }
  return fs::path(a).lexically_normal() == fs::path(b).lexically_normal();
}

bool IsFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string Join(const std::string& dir, const std::string& rel) {
  return dir.ends_with('/') ? dir + rel : absl::StrCat(dir, "/", rel);
}

}  // namespace

std::vector<std::string> KernelFirmwareDirs(const FirmwareSearch& search) {
  std::vector<std::string> out;
  if (!search.class_path.empty()) {
    out.push_back(search.class_path);
  }
  if (!search.kernel_release.empty()) {
    out.push_back("/lib/firmware/updates/" + search.kernel_release);
  }
  out.push_back("/lib/firmware/updates");
  if (!search.kernel_release.empty()) {
    out.push_back("/lib/firmware/" + search.kernel_release);
  }
  out.push_back("/lib/firmware");
  return out;
}

std::vector<Shadow> FindShadows(const FirmwareSearch& search, const std::string& firmware_dir,
                                const std::vector<std::string>& paths) {
  std::vector<Place> places;
  for (const std::string& dir : KernelFirmwareDirs(search)) {
    const std::string local = Local(search.host_root, dir);
    // firmware_class.path is the host's name for the directory kmodd stages in; when the
    // host's root is not mounted at all, compare the names.
    const bool staging = SameDir(local, firmware_dir) ||
                         (dir == search.class_path && SameDir(dir, firmware_dir));
    places.push_back(Place{dir, local, staging});
  }
  std::vector<Shadow> out;
  for (const std::string& rel : paths) {
    // The name a driver requests: a compressed file answers for the name without suffix.
    std::string name = rel;
    for (size_t p = 1; p < kPasses; ++p) {
      if (rel.size() > std::string_view(kSuffixes[p]).size() &&
          absl::EndsWith(rel, kSuffixes[p])) {
        name = rel.substr(0, rel.size() - std::string_view(kSuffixes[p]).size());
      }
    }
    // The kernel's first pick, with kmodd's directory and without it.
    std::optional<std::pair<const Place*, std::string>> with;
    std::optional<std::string> without;
    for (size_t p = 0; p < kPasses && !without; ++p) {
      for (const Place& place : places) {
        const std::string file = name + kSuffixes[p];
        if (!IsFile(Join(place.local, file))) {
          continue;
        }
        if (!with) {
          with = {&place, file};
        }
        if (!place.staging && !without) {
          without = Join(place.host, file);
          break;
        }
      }
    }
    if (with && with->first->staging && with->second == rel && without) {
      out.push_back(Shadow{rel, Join(firmware_dir, rel), *without});
    }
  }
  return out;
}

std::string ShadowWarning(const Shadow& s) {
  return absl::StrCat("staged firmware ", s.staged, " shadows the host's ", s.host_file,
                      ": the kernel loads the staged file instead");
}

std::string ReadClassPath(const std::string& param_file) {
  absl::StatusOr<std::string> value = ReadFile(param_file);
  if (!value.ok()) {
    return "";
  }
  while (!value->empty() && (value->back() == '\n' || value->back() == '\0')) {
    value->pop_back();
  }
  return *value;
}

}  // namespace kmodd::firmware

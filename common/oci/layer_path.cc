#include "common/oci/layer_path.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kmodd::image {
namespace {

constexpr std::string_view kWhiteoutPrefix = ".wh.";
constexpr std::string_view kWhiteoutMeta = ".wh..wh.";
constexpr std::string_view kOpaque = ".wh..wh..opq";

}  // namespace

std::string CleanArchivePath(std::string_view p) {
  while (p.starts_with("./") || p.starts_with('/')) {
    p.remove_prefix(p.starts_with('/') ? 1 : 2);
  }
  while (p.ends_with('/')) {
    p.remove_suffix(1);
  }
  return p == "." ? std::string() : std::string(p);
}

bool IsBeneath(std::string_view path, std::string_view dir) {
  return dir.empty() || path == dir ||
         (path.size() > dir.size() && path.substr(0, dir.size()) == dir && path[dir.size()] == '/');
}

absl::StatusOr<std::string> NormalizeEntryPath(std::string_view raw) {
  // "/" (Go's archive/tar, hence umoci) and "./" name the root: the empty path.
  if (!raw.empty() && raw.find_first_not_of("/.") == std::string_view::npos &&
      raw.find("..") == std::string_view::npos) {
    return std::string();
  }
  if (!raw.empty() && raw[0] == '/') {
    return absl::InvalidArgumentError("absolute path");
  }
  std::string out;
  out.reserve(raw.size());
  for (std::string_view part : Components(raw)) {
    if (part == ".") {
      continue;
    }
    if (part == "..") {
      return absl::InvalidArgumentError("path has a '..' component");
    }
    if (!out.empty()) {
      out.push_back('/');
    }
    out.append(part);
  }
  return out;
}

size_t PathDepth(std::string_view path) {
  return path.empty() ? 0 : static_cast<size_t>(std::count(path.begin(), path.end(), '/')) + 1;
}

absl::Status CheckSymlinkTarget(std::string_view link_path, std::string_view target) {
  if (target.empty()) {
    return absl::InvalidArgumentError("symlink with an empty target");
  }
  if (target[0] == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("symlink target \"", std::string(target),
                     "\" is absolute (it would leave the image root)"));
  }
  // Directories available to climb: the link's parents.
  size_t climbable = PathDepth(SplitParentView(link_path).first);
  bool named = false;
  for (std::string_view part : Components(target)) {
    if (part == ".") {
      continue;
    }
    if (part != "..") {
      named = true;
      continue;
    }
    if (named) {
      return absl::InvalidArgumentError(
          absl::StrCat("symlink target \"", std::string(target), "\" has '..' after a name"));
    }
    if (climbable == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("symlink target \"", std::string(target), "\" escapes the image root"));
    }
    --climbable;
  }
  return absl::OkStatus();
}

absl::StatusOr<Whiteout> ClassifyWhiteout(std::string_view path) {
  const auto [parent, base] = SplitParentView(path);
  Whiteout w;
  if (base.substr(0, kWhiteoutPrefix.size()) != kWhiteoutPrefix) {
    return w;
  }
  if (base == kOpaque) {
    w.kind = Whiteout::kOpaque;
    w.target = std::string(parent);
    return w;
  }
  if (base.substr(0, kWhiteoutMeta.size()) == kWhiteoutMeta) {
    w.kind = Whiteout::kIgnore;
    return w;
  }
  const std::string_view name = base.substr(kWhiteoutPrefix.size());
  if (name.empty() || name == "." || name == "..") {
    return absl::InvalidArgumentError("whiteout names no file");
  }
  w.kind = Whiteout::kRemove;
  w.target = parent.empty() ? std::string(name)
                            : absl::StrCat(std::string(parent), "/", std::string(name));
  return w;
}

absl::StatusOr<KeepFilter> KeepFilter::Make(const std::vector<std::string>& prefixes) {
  KeepFilter f;
  for (const std::string& p : prefixes) {
    // Prefixes come from kmodd's configuration, where "/firmware" is natural.
    const size_t start = p.find_first_not_of('/');
    absl::StatusOr<std::string> norm = NormalizeEntryPath(
        start == std::string::npos ? std::string_view() : std::string_view(p).substr(start));
    if (!norm.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("keep prefix \"", p, "\": ", norm.status().message()));
    }
    f.prefixes_.push_back(*std::move(norm));
  }
  return f;
}

bool KeepFilter::Keeps(std::string_view path) const {
  for (const std::string& p : prefixes_) {
    if (IsBeneath(path, p)) {
      return true;
    }
  }
  return false;
}

bool KeepFilter::Encloses(std::string_view path) const {
  for (const std::string& p : prefixes_) {
    if (p != path && IsBeneath(p, path)) {
      return true;
    }
  }
  return false;
}

bool IsKernelBuildLink(std::string_view path) {
  std::vector<std::string_view> parts = Components(path);
  const size_t n = parts.size();
  return n >= 4 && (parts[n - 1] == "build" || parts[n - 1] == "source") &&
         parts[n - 3] == "modules" && parts[n - 4] == "lib";
}

}  // namespace kmodd::image

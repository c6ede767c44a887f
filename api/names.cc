#include "api/names.h"

#include <algorithm>

#include <re2/re2.h>

#include "absl/strings/str_cat.h"

namespace kmodd::api {

namespace {

constexpr size_t kMaxLabelName = 63;
constexpr size_t kMaxDnsSubdomain = 253;

}  // namespace

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (size_t end = s.find(sep); end != std::string_view::npos; end = s.find(sep)) {
    parts.push_back(s.substr(0, end));
    s.remove_prefix(end + 1);
  }
  parts.push_back(s);
  return parts;
}

// Patterns are Kubernetes' own (k8s.io/apimachinery/pkg/util/validation), so that kmodd
// accepts exactly the keys and names the API server would. Leaked on purpose: no static
// destructor runs while another thread might still be validating.
bool IsLabelName(std::string_view s) {
  static const RE2& re = *new RE2("[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?");
  return s.size() <= kMaxLabelName && RE2::FullMatch(s, re);
}

bool IsDnsSubdomain(std::string_view s) {
  static const RE2& re =
      *new RE2("[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*");
  return s.size() <= kMaxDnsSubdomain && RE2::FullMatch(s, re);
}

bool IsDnsLabel(std::string_view s) {
  static const RE2& re = *new RE2("[a-z0-9]([-a-z0-9]*[a-z0-9])?");
  return s.size() <= kMaxLabelName && RE2::FullMatch(s, re);
}

const char kDnsSubdomainRule[] =
    "a DNS subdomain (lowercase letters, digits, '-' and '.', starting and ending with a letter "
    "or digit, at most 253 characters, e.g. gpu.example.com)";
const char kDnsLabelRule[] =
    "at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit "
    "(e.g. kmm-demo)";
const char kLabelNameRule[] =
    "at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit";

// Empty when `key` is a qualified name ([prefix/]name), else what is wrong with it.
std::string QualifiedNameProblem(std::string_view key) {
  const std::vector<std::string_view> parts = Split(key, '/');
  if (parts.size() > 2) {
    return "it has more than one '/'";
  }
  if (parts.size() == 2 && !IsDnsSubdomain(parts[0])) {
    return absl::StrCat("the prefix ", Quote(parts[0]), " must be ", kDnsSubdomainRule);
  }
  if (!IsLabelName(parts.back())) {
    return absl::StrCat("the name ", Quote(parts.back()), " must be ", kLabelNameRule);
  }
  return "";
}

// Go's path.Clean: the form KMM compares host paths in.
std::string CleanPath(std::string_view path) {
  const bool rooted = path.starts_with('/');
  std::vector<std::string_view> kept;
  for (std::string_view part : Split(path, '/')) {
    if (part.empty() || part == ".") {
      continue;
    }
    if (part == ".." && !kept.empty() && kept.back() != "..") {
      kept.pop_back();
    } else if (part != ".." || !rooted) {  // ".." above the root is the root
      kept.push_back(part);
    }
  }
  std::string clean = rooted ? "/" : "";
  for (size_t i = 0; i < kept.size(); ++i) {
    clean.append(i == 0 ? "" : "/").append(kept[i]);
  }
  return clean.empty() ? "." : clean;
}

bool HasDotDot(std::string_view path) {
  const std::vector<std::string_view> parts = Split(path, '/');
  return std::find(parts.begin(), parts.end(), "..") != parts.end();
}

bool IsUnder(std::string_view path, std::string_view dir) {
  return path == dir || path.starts_with(dir == "/" ? std::string("/") : std::string(dir) + "/");
}

// Empty when `image` pins a tag or digest. KMM only looks for a ':' or '@' anywhere, which
// takes the port of "registry:5000/repo" for a tag; the tag is in the last path segment.
std::string ImageProblem(std::string_view image) {
  constexpr char kValid[] =
      "add a tag (e.g. :$KERNEL_FULL_VERSION) or a digest (@sha256:<64 hex digits>)";
  if (const size_t at = image.find('@'); at != std::string_view::npos) {
    static const RE2& digest = *new RE2("sha256:[a-f0-9]{64}");
    if (!RE2::FullMatch(image.substr(at + 1), digest)) {
      return absl::StrCat(Quote(image), " has a malformed digest; a digest is sha256: followed by ",
                          "64 lowercase hex digits");
    }
    if (std::string_view name = image.substr(0, at); name.empty() || name.back() == '/') {
      return absl::StrCat(Quote(image), " has no repository name before '@'; ",
                          "e.g. reg.example/repo@sha256:<64 hex digits>");
    }
    return "";
  }
  const size_t slash = image.rfind('/');
  std::string_view last = slash == std::string_view::npos ? image : image.substr(slash + 1);
  const size_t colon = last.find(':');
  if (colon == std::string_view::npos || colon + 1 == last.size()) {
    return absl::StrCat(Quote(image), " has no tag or digest; ", kValid);
  }
  if (colon == 0) {
    return absl::StrCat(Quote(image),
                        " has a tag but no repository name; e.g. reg.example/repo:tag");
  }
  return "";
}

}  // namespace kmodd::api

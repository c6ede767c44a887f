#include "common/oci/reference.h"

#include <cctype>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kmodd::image {

namespace {

bool IsRepoChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-' || c == '/';
}

bool IsTagChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.' || c == '-';
}

absl::Status Bad(const std::string& text, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("image reference \"", text, "\": ", why,
                   " (expected [registry[:port]/]repository[:tag][@sha256:<hex>])"));
}

}  // namespace

bool IsDigest(const std::string& s) {
  if (s.size() != 71 || s.rfind("sha256:", 0) != 0) {
    return false;
  }
  for (size_t i = 7; i < s.size(); ++i) {
    const char c = s[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

std::string ImageRef::ApiHost() const {
  return registry == "docker.io" || registry == "index.docker.io" ? "registry-1.docker.io"
                                                                  : registry;
}

std::string ImageRef::ToString() const {
  std::string s = absl::StrCat(registry, "/", repository);
  if (!tag.empty()) {
    absl::StrAppend(&s, ":", tag);
  }
  if (!digest.empty()) {
    absl::StrAppend(&s, "@", digest);
  }
  return s;
}

absl::StatusOr<ImageRef> ParseImageRef(const std::string& text) {
  ImageRef r;
  std::string rest = text;
  if (rest.empty()) {
    return Bad(text, "empty");
  }
  if (const size_t at = rest.find('@'); at != std::string::npos) {
    r.digest = rest.substr(at + 1);
    rest = rest.substr(0, at);
    if (!IsDigest(r.digest)) {
      return Bad(text, "the digest must be sha256: followed by 64 lowercase hex digits");
    }
  }
  // The first component is a registry if it has a '.' or ':' or is "localhost".
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    const std::string first = rest.substr(0, slash);
    if (first.find('.') != std::string::npos || first.find(':') != std::string::npos ||
        first == "localhost") {
      r.registry = first;
      rest = rest.substr(slash + 1);
    }
  }
  if (r.registry.empty()) {
    r.registry = "docker.io";
  }
  const size_t last_slash = rest.rfind('/');
  const size_t colon = rest.find(':', last_slash == std::string::npos ? 0 : last_slash);
  if (colon != std::string::npos) {
    r.tag = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
    if (r.tag.empty() || r.tag.size() > 128) {
      return Bad(text, "the tag must have 1 to 128 characters");
    }
    for (char c : r.tag) {
      if (!IsTagChar(c)) {
        return Bad(text, absl::StrCat("the tag has an invalid character '", std::string(1, c), "'"));
      }
    }
  }
  if (rest.empty()) {
    return Bad(text, "no repository");
  }
  for (char c : rest) {
    if (!IsRepoChar(c)) {
      return Bad(text, absl::StrCat("the repository has an invalid character '", std::string(1, c),
                                    "' (lowercase letters, digits, '.', '_', '-', '/')"));
    }
  }
  if ((r.registry == "docker.io" || r.registry == "index.docker.io") &&
      rest.find('/') == std::string::npos) {
    rest = "library/" + rest;
  }
  r.repository = rest;
  if (r.tag.empty() && r.digest.empty()) {
    r.tag = "latest";
  }
  return r;
}

}  // namespace kmodd::image

#include "common/http/url.h"

#include <arpa/inet.h>

#include <cctype>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kmodd::http {
namespace {

uint16_t DefaultPort(std::string_view scheme) { return scheme == "https" ? 443 : 80; }

absl::Status Invalid(std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid URL \"", std::string(text), "\": ", std::string(why)));
}

bool IsHostNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '.' || c == '_';
}

// Bytes that may not appear in a request target: they would split or end the request line.
bool IsTargetSafe(std::string_view target) {
  for (char c : target) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) {
      return false;
    }
  }
  return true;
}

// Splits "host[:port]" or "[v6][:port]" from the authority part of a URL.
absl::Status ParseAuthority(std::string_view text, std::string_view authority, Url& url) {
  if (authority.find('@') != std::string_view::npos) {
    return Invalid(text, "credentials in the URL are not supported");
  }
  std::string_view host;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return Invalid(text, "unterminated IPv6 literal");
    }
    host = authority.substr(1, close - 1);
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        return Invalid(text, "junk after IPv6 literal");
      }
      port = rest.substr(1);
    }
    in6_addr addr{};
    if (inet_pton(AF_INET6, std::string(host).c_str(), &addr) != 1) {
      return Invalid(text, "bad IPv6 literal");
    }
  } else {
    const size_t colon = authority.rfind(':');
    host = authority.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
    }
    if (host.empty()) {
      return Invalid(text, "no host");
    }
    for (char c : host) {
      if (!IsHostNameChar(c)) {
        return Invalid(text, "bad character in host");
      }
    }
  }
  url.host = absl::AsciiStrToLower(std::string(host));
  url.port = DefaultPort(url.scheme);
  if (!port.empty()) {
    uint32_t n = 0;
    if (!absl::SimpleAtoi(std::string(port), &n) || n == 0 || n > 65535 ||
        port.find_first_not_of("0123456789") != std::string_view::npos) {
      return Invalid(text, "bad port");
    }
    url.port = static_cast<uint16_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

bool Url::IsIpv6Literal() const { return host.find(':') != std::string::npos; }

std::string Url::Authority() const {
  return IsIpv6Literal() ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

std::string Url::HostHeader() const {
  if (port == DefaultPort(scheme)) {
    return IsIpv6Literal() ? absl::StrCat("[", host, "]") : host;
  }
  return Authority();
}

std::string Url::ToString() const { return absl::StrCat(scheme, "://", HostHeader(), target); }

bool operator==(const Url& a, const Url& b) {
  return a.scheme == b.scheme && a.host == b.host && a.port == b.port && a.target == b.target;
}

absl::StatusOr<Url> ParseUrl(std::string_view text) {
  Url url;
  const size_t sep = text.find("://");
  if (sep == std::string_view::npos) {
    return Invalid(text, "not absolute (no scheme)");
  }
  url.scheme = absl::AsciiStrToLower(std::string(text.substr(0, sep)));
  if (url.scheme != "http" && url.scheme != "https") {
    return Invalid(text, "scheme must be http or https");
  }
  std::string_view rest = text.substr(sep + 3);
  rest = rest.substr(0, rest.find('#'));
  const size_t path_start = rest.find_first_of("/?");
  const std::string_view authority = rest.substr(0, path_start);
  if (absl::Status s = ParseAuthority(text, authority, url); !s.ok()) {
    return s;
  }
  const std::string_view target =
      path_start == std::string_view::npos ? std::string_view("/") : rest.substr(path_start);
  url.target = target.front() == '?' ? absl::StrCat("/", std::string(target)) : std::string(target);
  if (!IsTargetSafe(url.target)) {
    return Invalid(text, "spaces or control characters in the path");
  }
  return url;
}

absl::StatusOr<Url> ResolveLocation(const Url& base, std::string_view location) {
  if (location.find("://") != std::string_view::npos &&
      location.find("://") < location.find_first_of("/?")) {
    return ParseUrl(location);
  }
  if (location.substr(0, 2) == "//") {
    return ParseUrl(absl::StrCat(base.scheme, ":", std::string(location)));
  }
  std::string target;
  if (location.empty()) {
    target = base.target;
  } else if (location.front() == '/') {
    target = std::string(location);
  } else if (location.front() == '?') {
    target = absl::StrCat(base.target.substr(0, base.target.find('?')), std::string(location));
  } else {
    const std::string path = base.target.substr(0, base.target.find('?'));
    target = absl::StrCat(path.substr(0, path.rfind('/') + 1), std::string(location));
  }
  return ParseUrl(absl::StrCat(base.scheme, "://", base.HostHeader(), target));
}

}  // namespace kmodd::http

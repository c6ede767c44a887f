#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kmodd::http {

// An absolute http or https URL, split the way a client needs it to connect and to write the
// request line. Only what registries and the Kubernetes API use: no userinfo, no fragments.
struct Url {
  std::string scheme;  // "http" or "https", lower case
  std::string host;    // a name, an IPv4 literal, or an IPv6 literal without brackets
  uint16_t port = 0;   // always set: the scheme's default when the URL has none
  std::string target;  // path and query as sent in the request line; at least "/"

  bool IsHttps() const { return scheme == "https"; }
  bool IsIpv6Literal() const;
  // host:port, IPv6 literals in brackets: what identifies a server for credentials.
  std::string Authority() const;
  // The Host header: like Authority(), without the port when it is the scheme's default.
  std::string HostHeader() const;
  std::string ToString() const;
};

bool operator==(const Url& a, const Url& b);

// Parses an absolute http(s) URL. InvalidArgument, naming the URL, for anything else.
[[nodiscard]] absl::StatusOr<Url> ParseUrl(std::string_view text);

// Resolves a redirect's Location against the URL that answered with it: an absolute URL,
// a scheme-relative "//host/path", an absolute path, or a path relative to the base's.
[[nodiscard]] absl::StatusOr<Url> ResolveLocation(const Url& base, std::string_view location);

}  // namespace kmodd::http

#include <catch2/catch.hpp>

#include <string>

#include "common/http/url.h"

namespace kmodd::http {
namespace {

struct ParseRow {
  std::string text;
  std::string scheme;
  std::string host;
  uint16_t port;
  std::string target;
  std::string authority;
  std::string host_header;
};

TEST_CASE("ParseUrl splits http and https URLs the way a client connects and asks") {
  const ParseRow rows[] = {
      {"http://127.0.0.1:5000/v2/", "http", "127.0.0.1", 5000, "/v2/", "127.0.0.1:5000",
       "127.0.0.1:5000"},
      {"https://Registry.Example", "https", "registry.example", 443, "/", "registry.example:443",
       "registry.example"},
      {"HTTPS://quay.io/v2/a/b/manifests/v1?x=1#frag", "https", "quay.io", 443,
       "/v2/a/b/manifests/v1?x=1", "quay.io:443", "quay.io"},
      {"http://[::1]:8080/token?scope=a", "http", "::1", 8080, "/token?scope=a", "[::1]:8080",
       "[::1]:8080"},
      {"https://[2001:db8::2]/", "https", "2001:db8::2", 443, "/", "[2001:db8::2]:443",
       "[2001:db8::2]"},
      {"http://host?q", "http", "host", 80, "/?q", "host:80", "host"},
      {"http://host:80/", "http", "host", 80, "/", "host:80", "host"},
  };
  for (const ParseRow& row : rows) {
    INFO(row.text);
    auto url = ParseUrl(row.text);
    REQUIRE(url.ok());
    CHECK(url->scheme == row.scheme);
    CHECK(url->host == row.host);
    CHECK(url->port == row.port);
    CHECK(url->target == row.target);
    CHECK(url->Authority() == row.authority);
    CHECK(url->HostHeader() == row.host_header);
  }
}

TEST_CASE("ParseUrl refuses what a registry URL cannot be") {
  const char* rows[] = {
      "registry.example/v2/",   // no scheme
      "ftp://host/",            // not http
      "http:///path",           // no host
      "http://user:pw@host/",   // credentials belong in headers
      "http://host:0/",         // port out of range
      "http://host:65536/",     //
      "http://host:12a/",       //
      "http://[::1/",           // unterminated literal
      "http://[not-v6]/",       //
      "http://ho st/",          // bad host
      "http://host/a b",        // would split the request line
      "http://host/a\r\nX: y",  //
  };
  for (const char* text : rows) {
    INFO(text);
    auto url = ParseUrl(text);
    REQUIRE_FALSE(url.ok());
    CHECK(absl::IsInvalidArgument(url.status()));
  }
}

TEST_CASE(
    "ResolveLocation follows absolute, scheme-relative, absolute-path and relative redirects") {
  const auto base = ParseUrl("https://registry.example:5000/v2/repo/blobs/sha256:abc?x=1");
  REQUIRE(base.ok());
  const std::pair<std::string, std::string> rows[] = {
      {"https://storage.example/bucket/obj?sig=1", "https://storage.example/bucket/obj?sig=1"},
      {"http://plain.example/x", "http://plain.example/x"},
      {"//cdn.example/obj", "https://cdn.example/obj"},
      {"/v2/other", "https://registry.example:5000/v2/other"},
      {"sibling", "https://registry.example:5000/v2/repo/blobs/sibling"},
      {"?page=2", "https://registry.example:5000/v2/repo/blobs/sha256:abc?page=2"},
      {"/redirect?to=http://x/", "https://registry.example:5000/redirect?to=http://x/"},
  };
  for (const auto& [location, want] : rows) {
    INFO(location);
    auto url = ResolveLocation(*base, location);
    REQUIRE(url.ok());
    CHECK(url->ToString() == want);
  }
}

}  // namespace
}  // namespace kmodd::http

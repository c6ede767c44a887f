#include "common/oci/pull_secret.h"

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/oci/json_fields.h"

namespace kmodd::image {

namespace {

// "https://index.docker.io/v1/" -> "index.docker.io"; "reg:5000" stays.
std::string HostOf(std::string key) {
  if (const size_t scheme = key.find("://"); scheme != std::string::npos) {
    key = key.substr(scheme + 3);
  }
  if (const size_t slash = key.find('/'); slash != std::string::npos) {
    key = key.substr(0, slash);
  }
  return key;
}

bool SameRegistry(const std::string& key_host, const std::string& registry) {
  auto hub = [](const std::string& h) {
    return h == "docker.io" || h == "index.docker.io" || h == "registry-1.docker.io";
  };
  return key_host == registry || (hub(key_host) && hub(registry));
}

// One auths entry: {"auth": base64(user:password)} or {"username", "password"}.
absl::StatusOr<Credentials> ReadEntry(const Value& entry, const std::string& where) {
  if (!entry.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": expected an object, got ", JsonTypeName(entry)));
  }
  absl::StatusOr<std::string> auth = OptionalString(entry, "auth", where);
  absl::StatusOr<std::string> username = OptionalString(entry, "username", where);
  absl::StatusOr<std::string> password = OptionalString(entry, "password", where);
  for (const absl::Status& s : {auth.status(), username.status(), password.status()}) {
    if (!s.ok()) {
      return s;
    }
  }
  Credentials c{*username, *password};
  if (!auth->empty()) {
    std::string decoded;
    if (!absl::Base64Unescape(*auth, &decoded)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".auth is not base64"));
    }
    const size_t colon = decoded.find(':');
    if (colon == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".auth must encode user:password"));
    }
    c.username = decoded.substr(0, colon);
    c.password = decoded.substr(colon + 1);
  }
  return c;
}

}  // namespace

absl::StatusOr<std::optional<Credentials>> CredentialsFor(const std::string& dockerconfigjson,
                                                          const std::string& registry) {
  constexpr char kDoc[] = "pull secret (.dockerconfigjson)";
  absl::StatusOr<Value> root = ParseObject(dockerconfigjson, kDoc);
  if (!root.ok()) {
    return root.status();
  }
  absl::StatusOr<const Value*> auths = OptionalObject(*root, "auths", kDoc);
  if (!auths.ok()) {
    return auths.status();
  }
  if (*auths == nullptr) {
    return absl::InvalidArgumentError(
        "pull secret: no \"auths\" object; expected a .dockerconfigjson");
  }
  // Every entry is checked, not only this registry's: Go's encoding/json (docker's,
  // containerd's, the kubelet's) refuses the whole file for one malformed entry.
  std::optional<Credentials> found;
  for (const auto& [key, entry] : (*auths)->AsMap()) {
    const std::string where = absl::StrCat("pull secret: auths[\"", key, "\"]");
    absl::StatusOr<Credentials> c = ReadEntry(entry, where);
    if (!c.ok()) {
      return c.status();
    }
    if (found || !SameRegistry(HostOf(key), registry)) {
      continue;
    }
    if (c->username.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, " has no credentials"));
    }
    found = *std::move(c);
  }
  return found;
}

}  // namespace kmodd::image

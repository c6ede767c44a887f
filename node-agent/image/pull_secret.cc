#include "node-agent/image/pull_secret.h"

#include <yaml-cpp/yaml.h>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

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

}  // namespace

absl::StatusOr<std::optional<Credentials>> CredentialsFor(const std::string& dockerconfigjson,
                                                          const std::string& registry) {
  YAML::Node root;
  try {
    root = YAML::Load(dockerconfigjson);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("pull secret: not valid JSON (.dockerconfigjson): ", e.what()));
  }
  const YAML::Node auths = root.IsMap() ? root["auths"] : YAML::Node();
  if (!auths.IsMap()) {
    return absl::InvalidArgumentError(
        "pull secret: no \"auths\" object; expected a .dockerconfigjson");
  }
  for (const auto& kv : auths) {
    if (!SameRegistry(HostOf(kv.first.as<std::string>("")), registry)) {
      continue;
    }
    const YAML::Node& entry = kv.second;
    Credentials c;
    if (entry["auth"] && entry["auth"].IsScalar()) {
      std::string decoded;
      if (!absl::Base64Unescape(entry["auth"].Scalar(), &decoded)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "pull secret: auths[\"", kv.first.as<std::string>(""), "\"].auth is not base64"));
      }
      const size_t colon = decoded.find(':');
      if (colon == std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(
            "pull secret: auths[\"", kv.first.as<std::string>(""),
            "\"].auth must encode user:password"));
      }
      c.username = decoded.substr(0, colon);
      c.password = decoded.substr(colon + 1);
    } else {
      c.username = entry["username"].as<std::string>("");
      c.password = entry["password"].as<std::string>("");
    }
    if (c.username.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pull secret: auths[\"", kv.first.as<std::string>(""), "\"] has no credentials"));
    }
    return std::optional<Credentials>(std::move(c));
  }
  return std::optional<Credentials>();
}

}  // namespace kmodd::image

#pragma once

// Driver images for the server tests that pull for real: pushed to a real registry
// (tests/common/http/real_registry.h) or made as an OCI layout on disk, both with umoci and
// skopeo (tools/registry/push-image). The image cache pulls them with the agent's own HTTP
// client factory (node-agent/cli/image_flags.h: BeastFactory).

#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "node-agent/cli/image_flags.h"
#include "server_rig.h"
#include "tests/common/http/real_registry.h"

namespace kmodd::testing {

struct DriverImage {
  std::string image;   // the reference: registry/repo:tag, or oci-layout:PATH:TAG
  std::string digest;  // of its manifest (pushed images only)
};

// Builds `repo:tag`, a driver tree holding `module` (MakeDriverImage), with scratch space
// in `dir`; pushes it to `registry`, or only lays it out on disk when `registry` is null.
inline DriverImage MakeDriver(const Registry* registry, const std::string& dir,
                              const std::string& repo_tag, const std::string& module) {
  const std::string src = dir + "/src-" + module;
  MakeDriverImage(src, {module});
  const std::string where = registry != nullptr ? registry->Env("KMODD_REGISTRY_DIR") : dir + "/layouts";
  const auto [code, out] =
      Run(std::string(KMODD_SOURCE_DIR) + "/tools/registry/push-image " + where + " " + repo_tag +
          (registry != nullptr ? "" : " --no-push") + " --layer " + src);
  INFO(out);
  REQUIRE(code == 0);
  auto value = [&out = out](const std::string& key) {
    const size_t at = out.find(key + "=");
    REQUIRE(at != std::string::npos);
    const size_t from = at + key.size() + 1;
    return out.substr(from, out.find('\n', from) - from);
  };
  if (registry == nullptr) {
    return {"oci-layout:" + value("KMODD_IMAGE_LAYOUT") + ":" + repo_tag.substr(repo_tag.rfind(':') + 1),
            ""};
  }
  return {value("KMODD_IMAGE"), value("KMODD_IMAGE_DIGEST")};
}

}  // namespace kmodd::testing

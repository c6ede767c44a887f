#include <catch2/catch.hpp>

#include "controller/placement/mapping.h"
#include "placement_fixtures.h"

using kmodd::placement::CompiledModule;
using kmodd::testing::LoaderModule;
using kmodd::testing::ModuleFromYaml;

namespace {

const char kMappings[] = R"(      containerImage: reg/fallback:$KERNEL_FULL_VERSION
      inTreeModulesToRemove: [drv_old]
      registryTLS: {insecure: true}
      kernelMappings:
        - literal: 6.1.0-27-cloud-amd64
          containerImage: reg/literal:1
        - regexp: '^6\.1\.'
          containerImage: reg/six-one:${KERNEL_XYZ}
          registryTLS: {insecureSkipTLSVerify: true}
          inTreeModulesToRemove: []
        - regexp: 'el9'
          containerImage: ""
        - regexp: '^5\.'
          inTreeModuleToRemove: legacy_drv
          containerImage: reg/five:$MOD_NAMESPACE-$MOD_NAME
)";

}  // namespace

TEST_CASE("mapping resolution takes the first matching mapping with container fallbacks") {
  CompiledModule m(ModuleFromYaml(LoaderModule("m", kMappings)));
  struct Row {
    const char* kernel;
    const char* image;  // nullptr: no mapping
    bool insecure;
    bool skip_verify;
    std::vector<std::string> in_tree;
  };
  const std::vector<Row> rows = {
      // literal is exact equality and comes first in the list
      {"6.1.0-27-cloud-amd64", "reg/literal:1", true, false, {"drv_old"}},
      // regexp is an unanchored search; mapping TLS and an explicit empty list override
      {"6.1.0-28-cloud-amd64", "reg/six-one:6.1.0", false, true, {}},
      // a mapping without image falls back to the container's, substituted
      {"5.14.0-427.el9.x86_64", "reg/fallback:5.14.0-427.el9.x86_64", true, false, {"drv_old"}},
      // unanchored: 'el9' matches in the middle; earlier mappings win over later ones
      {"4.18.0-el9-x", "reg/fallback:4.18.0-el9-x", true, false, {"drv_old"}},
      // the deprecated single field becomes a one-element list
      {"5.10.0-1", "reg/five:ns-m", true, false, {"legacy_drv"}},
      {"6.2.0", nullptr, false, false, {}},
  };
  for (const auto& r : rows) {
    INFO(r.kernel);
    auto got = m.Resolve(r.kernel);
    REQUIRE(got.ok());
    if (r.image == nullptr) {
      CHECK_FALSE(got->has_value());
      continue;
    }
    REQUIRE(got->has_value());
    const auto& c = **got;
    CHECK(c.kernel_version == r.kernel);
    CHECK(c.container_image == r.image);
    CHECK(c.registry_tls.insecure == r.insecure);
    CHECK(c.registry_tls.insecure_skip_tls_verify == r.skip_verify);
    CHECK(c.in_tree_modules_to_remove == r.in_tree);
    CHECK(c.image_pull_policy == "IfNotPresent");
    CHECK(c.modprobe.dir_name == "/opt");
  }
}

TEST_CASE("a literal mapping is not a pattern") {
  CompiledModule m(ModuleFromYaml(LoaderModule("m", R"(      kernelMappings:
        - literal: 6.1.0.*
          containerImage: reg/x:1
)")));
  auto got = m.Resolve("6.1.0-27");
  REQUIRE(got.ok());
  CHECK_FALSE(got->has_value());
}

TEST_CASE("a bad variable in the image is a resolution error naming the image") {
  CompiledModule m(ModuleFromYaml(LoaderModule("m", R"(      kernelMappings:
        - regexp: '.'
          containerImage: reg/x:$DRIVER_VERSION
)")));
  auto got = m.Resolve("6.1.0");
  REQUIRE_FALSE(got.ok());
  CHECK(std::string(got.status().message()).find("reg/x:$DRIVER_VERSION") != std::string::npos);
}

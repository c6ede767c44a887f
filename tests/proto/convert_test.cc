#include <catch2/catch.hpp>

#include "proto/convert.h"

using kmodd::api::ModprobeArgs;
using kmodd::api::NodeModuleSpec;
using kmodd::proto::FromProto;
using kmodd::proto::ToProto;

namespace {

NodeModuleSpec Full() {
  NodeModuleSpec s;
  s.namespace_ = "gpu";
  s.name = "i915";
  s.version = "v2";
  s.image_repo_secret = kmodd::api::LocalObjectReference{"pull"};
  s.config.kernel_version = "6.1.0-57-cloud-amd64";
  s.config.container_image = "registry.example/i915:6.1.0-57";
  s.config.image_pull_policy = "Always";
  s.config.insecure_pull = true;
  s.config.in_tree_modules_to_remove = {"i915", "drm_buddy"};
  s.config.modprobe.module_name = "i915";
  s.config.modprobe.parameters = {"enable_guc=3"};
  s.config.modprobe.dir_name = "/opt";
  s.config.modprobe.firmware_path = "/firmware";
  s.config.modprobe.args = ModprobeArgs{{"-v"}, {}};
  s.config.modprobe.modules_loading_order = std::vector<std::string>{"i915", "drm"};
  return s;
}

}  // namespace

TEST_CASE("a module spec survives the wire, absent and empty lists kept apart") {
  const NodeModuleSpec full = Full();
  auto back = FromProto(ToProto(full));
  REQUIRE(back.ok());
  CHECK(*back == full);

  NodeModuleSpec bare = Full();
  bare.image_repo_secret.reset();
  bare.config.modprobe.args = ModprobeArgs{};
  bare.config.modprobe.modules_loading_order.reset();
  back = FromProto(ToProto(bare));
  REQUIRE(back.ok());
  CHECK(*back == bare);
  CHECK(back->config.modprobe.args.has_value());
  CHECK_FALSE(back->config.modprobe.modules_loading_order.has_value());
  CHECK_FALSE(back->config.modprobe.raw_args.has_value());
}

TEST_CASE("a desired state the agent cannot act on is refused, naming module and field") {
  struct Row {
    const char* what;
    std::function<void(kmodd::v1::ModuleSpec&)> breaks;
    const char* message;
  };
  const std::vector<Row> rows = {
      {"no kernel", [](auto& m) { m.clear_kernel_version(); },
       "module gpu/i915: kernelVersion is empty"},
      {"no image", [](auto& m) { m.clear_container_image(); },
       "module gpu/i915: containerImage is empty"},
      {"no module name", [](auto& m) { m.mutable_modprobe()->clear_module_name(); },
       "module gpu/i915: modprobe.moduleName is empty"},
      {"bad policy", [](auto& m) { m.set_image_pull_policy("Sometimes"); },
       "module gpu/i915: imagePullPolicy \"Sometimes\" is not one of"},
      // The controller's rules (api::ValidateNodeModuleSpec), for whoever sent the entry.
      {"dirName escaping the image", [](auto& m) { m.mutable_modprobe()->set_dir_name("../../etc"); },
       "module gpu/i915: config.modprobe.dirName: \"../../etc\" is not an absolute path"},
      {"dirName climbing out", [](auto& m) { m.mutable_modprobe()->set_dir_name("/opt/../../etc"); },
       "module gpu/i915: config.modprobe.dirName: \"/opt/../../etc\" has a '..' component"},
      {"firmwarePath the whole image", [](auto& m) { m.mutable_modprobe()->set_firmware_path("/"); },
       "module gpu/i915: config.modprobe.firmwarePath: \"/\" names the whole image"},
      {"firmwarePath relative", [](auto& m) { m.mutable_modprobe()->set_firmware_path("fw/../.."); },
       "module gpu/i915: config.modprobe.firmwarePath: \"fw/../..\" is not an absolute path"},
      {"firmwarePath too long",
       [](auto& m) { m.mutable_modprobe()->set_firmware_path("/" + std::string(1100, 'f')); },
       "module gpu/i915: config.modprobe.firmwarePath: the path beginning \"/fff"},
      {"firmwarePath with a NUL",
       [](auto& m) { m.mutable_modprobe()->set_firmware_path(std::string("/fw\0/..", 8)); },
       "module gpu/i915: config.modprobe.firmwarePath: the path beginning"},
      {"image without a tag", [](auto& m) { m.set_container_image("registry.example/i915"); },
       "module gpu/i915: config.containerImage: \"registry.example/i915\" has no tag or digest"},
      {"in-tree removal not a module name",
       [](auto& m) { m.set_in_tree_modules_to_remove(0, "../i915.ko"); },
       "module gpu/i915: config.inTreeModulesToRemove[0]: \"../i915.ko\" is not a kernel module name"},
      {"two problems at once",
       [](auto& m) {
         m.mutable_modprobe()->set_dir_name("../../etc");
         m.mutable_modprobe()->set_firmware_path("/etc/");
       },
       "module gpu/i915: 2 invalid fields:\n  config.modprobe.dirName: \"../../etc\" is not an "
       "absolute path; use an absolute path without '.', '..', '//' or a trailing '/', e.g. "
       "/opt\n  config.modprobe.firmwarePath: \"/etc/\" is not in normal form (write it as "
       "\"/etc\")"},
  };
  for (const auto& row : rows) {
    SECTION(row.what) {
      kmodd::v1::ModuleSpec m = ToProto(Full());
      row.breaks(m);
      auto got = FromProto(m);
      REQUIRE_FALSE(got.ok());
      CHECK_THAT(std::string(got.status().message()), Catch::StartsWith(row.message));
    }
  }
  SECTION("a module twice") {
    kmodd::v1::NodeDesired d;
    *d.add_modules() = ToProto(Full());
    *d.add_modules() = ToProto(Full());
    auto got = FromProto(d);
    REQUIRE_FALSE(got.ok());
    CHECK(std::string(got.status().message()) == "module gpu/i915 appears twice in desired state");
  }
}

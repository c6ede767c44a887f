#include <catch2/catch.hpp>

#include <set>
#include <vector>

#include "absl/strings/ascii.h"
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
  kmodd::api::ReadinessCheck version;
  version.name = "version";
  version.path = "/sys/module/i915/version";
  version.equals = "";
  kmodd::api::ReadinessCheck probe;
  probe.name = "probe";
  probe.kind = kmodd::api::ReadinessCheck::Kind::kKernelLog;
  probe.pattern = "i915.*failed";
  probe.seconds = 5;
  s.readiness = {version, probe};
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
      // The readiness checks: the agent applies the webhook's rules again.
      {"check of an unknown kind", [](auto& m) { m.mutable_readiness(0)->set_kind("exec"); },
       "module gpu/i915: readiness check \"version\": kind \"exec\" is not one of"},
      {"check reading a process's files",
       [](auto& m) { m.mutable_readiness(0)->set_path("/proc/1/root/etc/shadow"); },
       "module gpu/i915: readiness[0].path.path: \"/proc/1/root/etc/shadow\" is a process's"},
      {"check with a pattern RE2 refuses",
       [](auto& m) { m.mutable_readiness(1)->set_pattern("(x"); },
       "module gpu/i915: readiness[1].kernelLog.pattern: \"(x\" is not a valid RE2 pattern"},
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

TEST_CASE("every phase maps to one wire value and back") {
  std::vector<kmodd::api::Phase> all = {kmodd::api::Phase::kUnknown};
  all.insert(all.end(), kmodd::api::kAgentPhases.begin(), kmodd::api::kAgentPhases.end());
  std::set<int> wire;
  for (kmodd::api::Phase p : all) {
    INFO(kmodd::api::PhaseName(p));
    const kmodd::v1::Phase w = ToProto(p);
    CHECK(wire.insert(static_cast<int>(w)).second);
    CHECK(FromProto(w) == p);
  }
}

TEST_CASE("every wire phase maps to a phase and back, under the name the wire spells") {
  const google::protobuf::EnumDescriptor* d = kmodd::v1::Phase_descriptor();
  REQUIRE(d->value_count() == 8);
  for (int i = 0; i < d->value_count(); ++i) {
    const auto w = static_cast<kmodd::v1::Phase>(d->value(i)->number());
    INFO(d->value(i)->name());
    const kmodd::api::Phase p = FromProto(w);
    CHECK(ToProto(p) == w);
    if (w != kmodd::v1::PHASE_UNSPECIFIED) {
      CHECK(absl::AsciiStrToUpper(kmodd::api::PhaseName(p)) == d->value(i)->name());
    }
  }
}

TEST_CASE("the wire's phase numbers stay as released; an unknown one is Unknown") {
  CHECK(kmodd::v1::PHASE_UNSPECIFIED == 0);
  CHECK(kmodd::v1::PENDING == 1);
  CHECK(kmodd::v1::PULLING == 2);
  CHECK(kmodd::v1::LOADING == 3);
  CHECK(kmodd::v1::LOADED == 4);
  CHECK(kmodd::v1::UNLOADING == 5);
  CHECK(kmodd::v1::FAILED == 6);
  CHECK(kmodd::v1::AVAILABLE == 7);
  CHECK(FromProto(kmodd::v1::PHASE_UNSPECIFIED) == kmodd::api::Phase::kUnknown);
  CHECK(FromProto(static_cast<kmodd::v1::Phase>(42)) == kmodd::api::Phase::kUnknown);
}

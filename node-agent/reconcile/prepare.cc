#include "node-agent/reconcile/prepare.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/validate.h"
#include "node-agent/reconcile/modprobe_args.h"

namespace kmodd::reconcile {

namespace fs = std::filesystem;

absl::StatusOr<std::string> DirImageStore::RootFor(const api::NodeModuleSpec& m) {
  const std::string& image = m.config.container_image;
  if (image.rfind("dir:", 0) != 0) {
    return absl::UnimplementedError(absl::StrCat(
        "containerImage \"", image,
        "\": only dir:/path/to/rootfs is supported by this agent build (OCI pulls arrive "
        "with the image cache)"));
  }
  std::string root = image.substr(4);
  std::error_code ec;
  if (root.empty() || root[0] != '/' || !fs::is_directory(root, ec)) {
    return absl::NotFoundError(
        absl::StrCat("containerImage \"", image, "\": ", root, " is not a directory"));
  }
  return root;
}

namespace {

std::string Fingerprint(const api::NodeModuleSpec& s, const LoadCommand& c) {
  const auto& m = s.config.modprobe;
  return absl::StrJoin(
      {s.config.kernel_version, s.config.container_image, c.dir_name,
       absl::StrJoin(c.modules, ","), c.main_module, c.params, m.firmware_path,
       absl::StrJoin(s.config.in_tree_modules_to_remove, ","), s.version},
      "|");
}

}  // namespace

DesiredModule Prepare(const api::NodeModuleSpec& spec, const std::string& kernel_release,
                      ImageStore& images, kernel::Kernel& kernel) {
  DesiredModule d;
  d.key = spec.Key();
  d.source = spec.config.container_image;
  d.in_tree_remove = spec.config.in_tree_modules_to_remove;
  auto fail = [&](absl::Status s) {
    d.problem = std::move(s);
    return d;
  };
  if (spec.config.kernel_version != kernel_release) {
    return fail(absl::FailedPreconditionError(
        absl::StrCat("desired state is for kernel ", spec.config.kernel_version,
                     " but this node runs ", kernel_release)));
  }
  auto cmd = InterpretLoad(spec.config.modprobe);
  if (!cmd.ok()) {
    return fail(cmd.status());
  }
  // Checked again where they are joined onto the image's root, whoever validated them
  // before; the effective directory may also come from a -d in the modprobe arguments.
  const api::ModprobeSpec& modprobe = spec.config.modprobe;
  if (std::string p = api::ImagePathProblem(cmd->dir_name, api::kDefaultDirName); !p.empty()) {
    const bool from_dash_d = cmd->dir_name != modprobe.EffectiveDirName();
    return fail(absl::InvalidArgumentError(
        absl::StrCat(from_dash_d ? "modprobe -d (in args or rawArgs): " : "modprobe.dirName: ", p)));
  }
  if (modprobe.firmware_path == "/") {
    return fail(absl::InvalidArgumentError(
        "modprobe.firmwarePath: \"/\" names the whole image; name the firmware directory"));
  }
  if (!modprobe.firmware_path.empty()) {
    if (std::string p = api::ImagePathProblem(modprobe.firmware_path, "/firmware"); !p.empty()) {
      return fail(absl::InvalidArgumentError(absl::StrCat("modprobe.firmwarePath: ", p)));
    }
  }
  auto unload = InterpretUnload(spec.config.modprobe);
  if (!unload.ok()) {
    return fail(unload.status());
  }
  d.unload_order = *unload;
  d.fingerprint = Fingerprint(spec, *cmd);
  auto root = images.RootFor(spec);
  if (!root.ok()) {
    return fail(root.status());
  }
  d.tree = absl::StrCat(*root, cmd->dir_name, "/lib/modules/", kernel_release);
  if (!modprobe.firmware_path.empty()) {
    d.firmware_source = absl::StrCat(*root, modprobe.firmware_path);
  }
  auto tree = kernel::DriverTree::Open(d.tree);
  if (!tree.ok()) {
    return fail(tree.status());
  }
  auto steps = kernel::PlanLoad(*tree, cmd->modules, cmd->main_module, cmd->params,
                                [&kernel](const std::string& n) { return kernel.HostModulePath(n); });
  if (!steps.ok()) {
    return fail(steps.status());
  }
  d.steps = std::move(*steps);
  // Refuse a module built for another kernel before anything is removed or inserted.
  auto vermagic = kernel.RunningVermagic();
  if (!vermagic.ok()) {
    return fail(vermagic.status());
  }
  for (const auto& step : d.steps) {
    if (step.source != kernel::LoadStep::Source::kTree) {
      continue;
    }
    if (auto s = kernel::CheckVermagic(*tree->Find(step.name), *vermagic); !s.ok()) {
      return fail(s);
    }
  }
  return d;
}

}  // namespace kmodd::reconcile

// kmodd-controller preflight: does every Module have a driver for kernel K? See
// controller/preflight/preflight.h for the stages.

#include <filesystem>
#include <optional>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/flags.h"
#include "common/table.h"
#include "common/value.h"
#include "controller/cli/commands.h"
#include "controller/cli/inputs.h"
#include "common/clock.h"
#include "common/file.h"
#include "controller/kube/config.h"
#include "controller/kube/rest_client.h"
#include "controller/kube_mode/preflight_validations.h"
#include "controller/preflight/preflight.h"

namespace kmodd::cli {

namespace {

constexpr char kUsage[] =
    "usage: kmodd-controller preflight --kernel RELEASE (--modules PATH [--modules PATH...] |\n"
    "                                  --kubernetes [--kubeconfig FILE])\n"
    "                                  [--ca FILE] [--docker-config FILE] [--kernel-tree DIR]\n"
    "                                  [-o table|yaml|json]\n";

// KMM's PreflightValidation status: status.modules[] with verificationStatus, verificationStage
// and statusReason; kmodd adds what it looked at.
Value ResultsValue(const std::string& kernel, const std::vector<preflight::Result>& results) {
  Value modules = Value::EmptyList();
  for (const preflight::Result& r : results) {
    const size_t slash = r.module.find('/');
    Value m = Value::EmptyMap();
    m.Set("namespace", r.module.substr(0, slash));
    m.Set("name", r.module.substr(slash + 1));
    m.Set("verificationStatus", r.success ? "Success" : "Failure");
    m.Set("verificationStage", r.stage);
    m.Set("statusReason", r.reason);
    if (!r.image.empty()) {
      m.Set("image", r.image);
    }
    if (!r.digest.empty()) {
      m.Set("digest", r.digest);
      m.Set("imageBytes", r.image_bytes);
      m.Set("bytesFetched", r.bytes_fetched);
    }
    if (!r.notes.empty()) {
      Value notes = Value::EmptyList();
      for (const std::string& n : r.notes) {
        notes.Append(n);
      }
      m.Set("found", std::move(notes));
    }
    modules.Append(std::move(m));
  }
  Value v = Value::EmptyMap();
  v.Set("kernelVersion", kernel);
  v.Set("modules", std::move(modules));
  return v;
}

}  // namespace

int PreflightCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string kernel;
  std::vector<std::string> module_paths;
  std::string format = "table";
  std::string ca;
  std::string docker_config;
  std::string kernel_tree;
  flags::FlagSet flags("kmodd-controller preflight", kUsage);
  flags.String("--kernel", "RELEASE", "the kernel the fleet moves to, as `uname -r` prints it", &kernel)
      .Required();
  flags.Strings("--modules", "PATH", "a Module manifest or a directory of them", &module_paths);
  bool kubernetes = false;
  std::string kubeconfig;
  flags.Switch("--kubernetes",
               "the cluster's Modules instead, each with the Secret its imageRepoSecret names", &kubernetes);
  flags.String("--kubeconfig", "FILE", "with --kubernetes: the client configuration (default: in-cluster)",
               &kubeconfig);
  flags.String("--ca", "FILE", "extra CAs (PEM) for the registries, beside the system's", &ca);
  flags.String("--docker-config", "FILE",
               "registry credentials: a .dockerconfigjson (what a pull Secret holds, or\n"
               "~/.docker/config.json)",
               &docker_config);
  flags.String("--kernel-tree", "DIR",
               "the kernel's module tree (its modules.dep and modules.builtin), to check that\n"
               "dependencies outside the image exist; default /lib/modules/RELEASE when there",
               &kernel_tree);
  flags.OneOf("-o,--output", "FORMAT",
              "table (default); yaml and json print KMM's PreflightValidation status\n"
              "(modules[] with verificationStatus, verificationStage, statusReason)",
              &format, {"table", "yaml", "json"});
  if (std::optional<int> exit = flags.ParseOrExit(args, out, err)) {
    return *exit;
  }
  if (module_paths.empty() == !kubernetes) {
    return flags.UsageError(err, "give --modules (Module manifests or directories) or --kubernetes, one of them");
  }
  if (!kubeconfig.empty() && !kubernetes) {
    return flags.UsageError(err, "--kubeconfig goes with --kubernetes");
  }
  api::Decoded mods;
  if (!kubernetes) {
    mods = DecodePaths(module_paths);
    mods.nodes.clear();
    ValidateDecoded(mods);
    PrintDiagnostics(mods, err);
    if (!mods.errors.empty()) {
      err << "error: no preflight: fix the errors above\n";
      return 1;
    }
    if (mods.modules.empty()) {
      err << "error: no Module found in --modules " << JoinPaths(module_paths) << "\n";
      return 1;
    }
  }
  preflight::Options options;
  options.kernel = kernel;
  options.ca_file = ca;
  if (!docker_config.empty()) {
    absl::StatusOr<std::string> text = ReadFile(docker_config);
    if (!text.ok()) {
      err << "error: --docker-config: " << text.status().message() << "\n";
      return 1;
    }
    options.docker_config = std::move(*text);
  }
  const bool tree_given = !kernel_tree.empty();
  if (!tree_given) {
    kernel_tree = absl::StrCat("/lib/modules/", kernel);
  }
  std::error_code ec;
  if (tree_given || std::filesystem::exists(kernel_tree + "/modules.dep", ec)) {
    absl::StatusOr<preflight::KernelTree> tree = preflight::ReadKernelTree(kernel_tree);
    if (!tree.ok()) {
      err << "error: --kernel-tree: " << tree.status().message() << " (give the kernel's /lib/modules/"
          << kernel << ")\n";
      return 1;
    }
    options.kernel_modules = std::move(tree->modules);
    options.kernel_vermagic = std::move(tree->vermagic);
  }
  options.progress = [&err](const std::string& module, int64_t bytes, int64_t total) {
    err << module << ": fetched " << bytes << " of " << total << " bytes\n";
  };
  std::vector<preflight::Result> results;
  if (kubernetes) {
    if (!docker_config.empty()) {
      return flags.UsageError(err, "--docker-config goes with --modules: with --kubernetes each Module's "
                                   "imageRepoSecret gives its credentials");
    }
    RealClock clock;
    absl::StatusOr<std::unique_ptr<kube::RestKubeClient>> client = KubeClientFor(kubeconfig, clock);
    if (!client.ok()) {
      err << "error: " << client.status().message() << "\n";
      return 1;
    }
    absl::StatusOr<std::vector<preflight::Result>> found = source::PreflightClusterModules(**client, options);
    if (!found.ok()) {
      err << "error: cannot list the cluster's Modules: " << found.status().message() << "\n";
      return 1;
    }
    if (found->empty()) {
      err << "error: the cluster has no Module\n";
      return 1;
    }
    results = std::move(*found);
  } else {
    std::vector<api::Module> modules;
    for (auto& m : mods.modules) {
      modules.push_back(std::move(m.object));
    }
    results = preflight::Preflight(modules, options);
  }
  bool all = true;
  for (const preflight::Result& r : results) {
    all = all && r.success;
  }
  if (format == "table") {
    std::vector<TableRow> rows = {{"MODULE", "STATUS", "STAGE", "IMAGE", "REASON"}};
    for (const preflight::Result& r : results) {
      rows.push_back({r.module, r.success ? "Success" : "Failure", r.stage,
                      r.image.empty() ? "-" : r.image, r.reason});
    }
    out << RenderTable(rows);
    for (const preflight::Result& r : results) {
      for (const std::string& n : r.notes) {
        out << r.module << ": " << n << "\n";
      }
    }
  } else {
    const Value v = ResultsValue(kernel, results);
    out << (format == "json" ? ToJson(v) : ToYaml(v));
  }
  return all ? 0 : 1;
}

}  // namespace kmodd::cli

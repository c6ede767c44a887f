#include <optional>
#include <ostream>

#include "common/flags.h"
#include "controller/cli/commands.h"
#include "controller/cli/inputs.h"
#include "controller/cli/output.h"
#include "controller/placement/placer.h"

namespace kmodd::cli {

namespace {

constexpr char kUsage[] =
    "usage: kmodd-controller plan --modules PATH [--modules PATH...] --nodes FILE\n"
    "                             [-o yaml|json|table]\n";

}  // namespace

int PlanCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> module_paths;
  std::vector<std::string> node_paths;
  std::string format = "yaml";
  flags::FlagSet flags("kmodd-controller plan", kUsage);
  flags.Strings("--modules", "PATH", "a Module manifest or a directory of them", &module_paths);
  flags.Strings("--nodes", "FILE", "what `kubectl get nodes -o yaml` prints, or Node documents",
                &node_paths);
  flags.OneOf("-o,--output", "FORMAT",
              "yaml (default) and json print a v1 List of NodeModulesConfig, one per node\n"
              "that runs at least one module; table also says why the rest do not",
              &format, {"yaml", "json", "table"});
  if (std::optional<int> exit = flags.ParseOrExit(args, out, err)) {
    return *exit;
  }
  if (module_paths.empty() || node_paths.empty()) {
    return flags.UsageError(err, "both --modules and --nodes are required");
  }
  api::Decoded mods = DecodePaths(module_paths);
  mods.nodes.clear();  // Nodes come from --nodes only
  ValidateDecoded(mods);
  api::Decoded nodes = DecodePaths(node_paths);
  PrintDiagnostics(mods, err);
  PrintDiagnostics(nodes, err);
  if (!mods.errors.empty() || !nodes.errors.empty()) {
    err << "error: no plan: fix the errors above\n";
    return 1;
  }
  // Nothing found is an error, not an empty plan: a mistyped path or swapped arguments.
  if (mods.modules.empty()) {
    err << "error: no Module found in --modules " << JoinPaths(module_paths)
        << (nodes.modules.empty() ? "" : " (the --nodes input holds Modules: swapped arguments?)")
        << "\n";
    return 1;
  }
  if (nodes.nodes.empty()) {
    err << "error: no Node found in --nodes " << JoinPaths(node_paths)
        << " (give what `kubectl get nodes -o yaml` prints)\n";
    return 1;
  }
  std::vector<api::Module> modules;
  for (auto& m : mods.modules) {
    modules.push_back(std::move(m.object));
  }
  std::vector<api::Node> node_list;
  for (auto& n : nodes.nodes) {
    node_list.push_back(std::move(n.object));
  }
  placement::PlacementResult r = placement::PlaceOnce(std::move(modules), std::move(node_list));
  if (format == "table") {
    out << PlacementTable(r.nodes);
  } else {
    Value v = PlacementListValue(r.nodes);
    out << (format == "json" ? ToJson(v) : ToYaml(v));
  }
  return 0;
}

}  // namespace kmodd::cli

#include <ostream>

#include "controller/cli/commands.h"
#include "controller/cli/inputs.h"
#include "controller/cli/output.h"
#include "controller/plan/planner.h"

namespace kmodd::cli {

namespace {

constexpr char kUsage[] =
    "usage: kmodd-controller plan --modules PATH [--modules PATH...] --nodes FILE\n"
    "                             [-o yaml|json|table]\n"
    "  --modules  a Module manifest or a directory of them\n"
    "  --nodes    what `kubectl get nodes -o yaml` prints, or Node documents\n"
    "  -o         yaml (default) and json print a v1 List of NodeModulesConfig, one per node\n"
    "             that runs at least one module; table also says why the rest do not\n";

}  // namespace

int PlanCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> module_paths;
  std::vector<std::string> node_paths;
  std::string format = "yaml";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has_value = i + 1 < args.size();
    const bool takes_value = a == "--modules" || a == "--nodes" || a == "-o" || a == "--output";
    if (takes_value && !has_value) {
      err << "error: " << a << " needs a value\n" << kUsage;
      return 2;
    }
    if (a == "--modules") {
      module_paths.push_back(args[++i]);
    } else if (a == "--nodes") {
      node_paths.push_back(args[++i]);
    } else if (a == "-o" || a == "--output") {
      format = args[++i];
    } else if (a == "-h" || a == "--help") {
      out << kUsage;
      return 0;
    } else {
      err << "error: unexpected argument \"" << a << "\"\n" << kUsage;
      return 2;
    }
  }
  if (format != "yaml" && format != "json" && format != "table") {
    err << "error: -o " << format << ": expected yaml, json or table\n";
    return 2;
  }
  if (module_paths.empty() || node_paths.empty()) {
    err << "error: both --modules and --nodes are required\n" << kUsage;
    return 2;
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
  plan::PlanResult r = plan::PlanOnce(std::move(modules), std::move(node_list));
  if (format == "table") {
    out << PlanTable(r.nodes);
  } else {
    Value v = PlanListValue(r.nodes);
    out << (format == "json" ? ToJson(v) : ToYaml(v));
  }
  return 0;
}

}  // namespace kmodd::cli

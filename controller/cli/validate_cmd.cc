#include <optional>
#include <ostream>

#include "common/flags.h"
#include "controller/cli/commands.h"
#include "controller/cli/inputs.h"

namespace kmodd::cli {

namespace {

constexpr char kUsage[] =
    "usage: kmodd-controller validate -f PATH [-f PATH...]\n"
    "  PATH is a Module manifest (YAML or JSON; multi-document or a v1 List) or a\n"
    "  directory of them. Exits 0 iff every Module is valid.\n";

}  // namespace

int ValidateCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> paths;
  flags::FlagSet flags("kmodd-controller validate", kUsage);
  flags.Strings("-f,--filename", "PATH", "a Module manifest or a directory of them (repeatable)",
                &paths)
      .Needs("a path (a Module manifest or a directory)");
  if (std::optional<int> exit = flags.ParseOrExit(args, out, err)) {
    return *exit;
  }
  if (paths.empty()) {
    return flags.UsageError(err, "no input; give at least one -f PATH");
  }
  api::Decoded d = DecodePaths(paths);
  ValidateDecoded(d);
  PrintDiagnostics(d, err);
  if (!d.errors.empty()) {
    err << d.errors.size() << " error(s)\n";
    return 1;
  }
  if (d.modules.empty()) {
    // A mistyped path, a nodes file or an empty file must not look like success.
    err << "error: no Module found in " << JoinPaths(paths);
    if (!d.nodes.empty()) {
      err << " (it holds " << d.nodes.size()
          << " Node(s): `plan --nodes` reads those; validate checks Modules)";
    }
    err << "\n";
    return 1;
  }
  out << d.modules.size() << " Module(s) valid\n";
  return 0;
}

}  // namespace kmodd::cli

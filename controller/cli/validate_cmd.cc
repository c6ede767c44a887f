#include <ostream>

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
  for (size_t i = 0; i < args.size(); ++i) {
    if ((args[i] == "-f" || args[i] == "--filename") && i + 1 < args.size()) {
      paths.push_back(args[++i]);
    } else if (args[i] == "-h" || args[i] == "--help") {
      out << kUsage;
      return 0;
    } else {
      err << "error: unexpected argument \"" << args[i] << "\"\n" << kUsage;
      return 2;
    }
  }
  if (paths.empty()) {
    err << "error: no input; give at least one -f PATH\n" << kUsage;
    return 2;
  }
  api::Decoded d = DecodePaths(paths);
  ValidateDecoded(d);
  PrintDiagnostics(d, err);
  if (!d.errors.empty()) {
    err << d.errors.size() << " error(s)\n";
    return 1;
  }
  out << d.modules.size() << " Module(s) valid\n";
  return 0;
}

}  // namespace kmodd::cli

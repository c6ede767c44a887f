// kmodd-controller: decides, for every node, which kernel modules from which images it
// should run. This binary is the command-line front; each subcommand lives in its own file.

#include <iostream>
#include <string>
#include <vector>

#include "controller/cli/commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>&, std::ostream&, std::ostream&);
  const char* help;
};

constexpr Command kCommands[] = {
    {"validate", kmodd::cli::ValidateCommand, "check Module manifests as the admission webhook would"},
    {"plan", kmodd::cli::PlanCommand, "print the modules every node should run (NodeModulesConfig)"},
    {"run", kmodd::cli::RunCommand, "serve agents: Modules from a watched directory (standalone)"},
    {"status", kmodd::cli::StatusCommand, "show Module status as the running controller wrote it"},
};

void Usage(std::ostream& os) {
  os << "usage: kmodd-controller COMMAND [ARGS]\n\ncommands:\n";
  for (const auto& c : kCommands) {
    os << "  " << c.name << std::string(10 - std::string(c.name).size(), ' ') << c.help << "\n";
  }
  os << "\n`kmodd-controller COMMAND --help` describes each command.\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    Usage(std::cerr);
    return 2;
  }
  const std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    Usage(std::cout);
    return 0;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const auto& c : kCommands) {
    if (name == c.name) {
      return c.run(args, std::cout, std::cerr);
    }
  }
  std::cerr << "error: unknown command \"" << name << "\"\n";
  Usage(std::cerr);
  return 2;
}

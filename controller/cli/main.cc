// kmodd-controller: decides, for every node, which kernel modules from which images it
// should run. This binary is the command-line front; each subcommand lives in its own file.

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/flags.h"
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
    {"preflight", kmodd::cli::PreflightCommand, "check that every Module has a working driver for a kernel"},
    {"build", kmodd::cli::BuildCommand, "build a Module's image for a kernel with buildah (KMM's build)"},
    {"sign", kmodd::cli::SignCommand, "sign a Module's unsignedImage into its containerImage (KMM's sign)"},
    {"rollout", kmodd::cli::RolloutCommand, "a Module's rollout: status, pause, resume, undo"},
};

std::string Usage() {
  std::string usage = "usage: kmodd-controller COMMAND [ARGS]\n\ncommands:\n";
  for (const auto& c : kCommands) {
    absl::StrAppend(&usage, "  ", c.name, std::string(10 - std::string(c.name).size(), ' '),
                    c.help, "\n");
  }
  absl::StrAppend(&usage, "\n`kmodd-controller COMMAND --help` describes each command.\n");
  return usage;
}

}  // namespace

int main(int argc, char** argv) {
  std::string name;
  std::vector<std::string> args;
  kmodd::flags::FlagSet flags("kmodd-controller", Usage());
  flags.Positional("COMMAND", "", &name).Needs("a COMMAND");
  flags.Rest("ARGS", "", &args);
  flags.StopAtFirstPositional();  // the rest is the command's
  if (std::optional<int> exit =
          flags.ParseOrExit(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr)) {
    return *exit;
  }
  if (name == "help") {
    std::cout << flags.Help();
    return 0;
  }
  for (const auto& c : kCommands) {
    if (name == c.name) {
      return c.run(args, std::cout, std::cerr);
    }
  }
  return flags.UsageError(std::cerr, absl::StrCat("unknown command \"", name, "\""));
}

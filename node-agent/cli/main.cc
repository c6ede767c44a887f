// kmodd-agent: the node side of kmodd. The daemon (run) and one-shot commands (apply,
// cleanup, pull, watch). Each command lives in its own file.

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "node-agent/cli/commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>&);
  const char* help;
};

constexpr Command kCommands[] = {
    {"apply", kmodd::agent::ApplyCommand, "reconcile this node to a NodeModulesConfig once, then exit"},
    {"cleanup", kmodd::agent::CleanupCommand, "remove what kmodd keeps on this node (after uninstall)"},
    {"pull", kmodd::agent::PullCommand, "pull and extract one driver image into the cache"},
    {"run", kmodd::agent::RunCommand, "run the agent: sync with the controller, reconcile, serve agentctl"},
    {"watch", kmodd::agent::WatchCommand, "print the kernel's module load/unload events as they happen"},
};

std::string Usage() {
  std::string usage = "usage: kmodd-agent COMMAND [ARGS]\n\ncommands:\n";
  for (const auto& c : kCommands) {
    absl::StrAppend(&usage, "  ", c.name, std::string(8 - std::string(c.name).size(), ' '),
                    c.help, "\n");
  }
  return usage;
}

}  // namespace

int main(int argc, char** argv) {
  std::string cmd;
  std::vector<std::string> args;
  kmodd::flags::FlagSet flags("kmodd-agent", Usage());
  flags.Positional("COMMAND", "", &cmd).Needs("a COMMAND");
  flags.Rest("ARGS", "", &args);
  flags.StopAtFirstPositional();  // the rest is the command's
  if (std::optional<int> exit =
          flags.ParseOrExit(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr)) {
    return *exit;
  }
  for (const auto& c : kCommands) {
    if (cmd == c.name) {
      return c.run(args);
    }
  }
  if (cmd == "help") {
    std::cout << flags.Help();
    return 0;
  }
  return flags.UsageError(std::cerr, absl::StrCat("unknown command \"", cmd, "\""));
}

// kmodd-agent: the node side of kmodd. The daemon (run) and one-shot commands (apply,
// cleanup, pull, watch). Each command lives in its own file.

#include <iostream>
#include <string>
#include <vector>

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

void Usage(std::ostream& os) {
  os << "usage: kmodd-agent COMMAND [ARGS]\n\ncommands:\n";
  for (const auto& c : kCommands) {
    os << "  " << c.name << std::string(8 - std::string(c.name).size(), ' ') << c.help << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    Usage(std::cerr);
    return 2;
  }
  const std::string cmd = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  for (const auto& c : kCommands) {
    if (cmd == c.name) {
      return c.run(args);
    }
  }
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    Usage(std::cout);
    return 0;
  }
  std::cerr << "error: unknown command \"" << cmd << "\"\n";
  Usage(std::cerr);
  return 2;
}

// kmodd-agent: the node side of kmodd. Only `apply` (one-shot) exists so far; the daemon
// arrives with the Sync protocol.

#include <iostream>
#include <string>
#include <vector>

#include "node-agent/cli/commands.h"

int main(int argc, char** argv) {
  const std::string usage =
      "usage: kmodd-agent COMMAND [ARGS]\n\ncommands:\n"
      "  apply   reconcile this node to a NodeModulesConfig once, then exit\n";
  if (argc < 2) {
    std::cerr << usage;
    return 2;
  }
  const std::string cmd = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (cmd == "apply") {
    return kmodd::agent::ApplyCommand(args);
  }
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    std::cout << usage;
    return 0;
  }
  std::cerr << "error: unknown command \"" << cmd << "\"\n" << usage;
  return 2;
}

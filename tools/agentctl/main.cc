// agentctl: the on-node view of kmodd. A thin client of the agent's local gRPC service;
// the commands live in tools/agentctl/*_cmd.cc, the table in run.cc.

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "tools/agentctl/command.h"

int main(int argc, char** argv) {
  const char* env = std::getenv("KMODD_AGENT_SOCKET");
  const std::string socket =
      env != nullptr && *env != '\0' ? env : kmodd::agentctl::kDefaultSocket;
  return kmodd::agentctl::Run(std::vector<std::string>(argv + 1, argv + argc), socket, std::cout,
                              std::cerr);
}

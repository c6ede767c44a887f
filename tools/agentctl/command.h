#pragma once

// What every agentctl subcommand gets: the global options, the output streams, and a way
// to reach the agent. One file per subcommand (kmod's tools/ layout); run.cc holds the table.

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/flags.h"
#include "common/value.h"
#include "tools/agentctl/client.h"

namespace kmodd::agentctl {

struct Context {
  std::string socket;
  std::string output;  // "", "yaml", "json" or "wide" (checked against the command's list)
  std::string usage;   // "usage: agentctl get NAMESPACE/NAME [-o yaml|json]\n..."
  std::ostream& out;
  std::ostream& err;

  [[nodiscard]] absl::StatusOr<std::unique_ptr<AgentClient>> Dial() const {
    return AgentClient::Connect(socket);
  }
  // Prints the error as "error: ..." and returns the exit code for it: 1.
  int Fail(const absl::Status& s) const;
  // For a command line that does not parse: 2, as for any usage error.
  int Usage(const std::string& message) const;
  // The command's flags, parsed: the exit code when the command must end now (a usage
  // error: 2), nullopt to run.
  [[nodiscard]] std::optional<int> Parse(flags::FlagSet& flags,
                                         const std::vector<std::string>& args) const;
};

// "namespace/name" -> {namespace, name}.
[[nodiscard]] absl::StatusOr<std::pair<std::string, std::string>> ParseModuleRef(
    const std::string& ref);

using CommandFn = int (*)(const Context&, const std::vector<std::string>&);

int StatusCommand(const Context& ctx, const std::vector<std::string>& args);
int GetCommand(const Context& ctx, const std::vector<std::string>& args);
int EventsCommand(const Context& ctx, const std::vector<std::string>& args);
int PlanCommand(const Context& ctx, const std::vector<std::string>& args);
int LoadCommand(const Context& ctx, const std::vector<std::string>& args);
int UnloadCommand(const Context& ctx, const std::vector<std::string>& args);
int FirmwareCommand(const Context& ctx, const std::vector<std::string>& args);
int ImagesCommand(const Context& ctx, const std::vector<std::string>& args);

// -o yaml|json: the value, as kubectl prints it.
void PrintValue(const Context& ctx, const Value& v);

// The whole command line after argv[0]. `default_socket` is $KMODD_AGENT_SOCKET or the
// built-in default; --socket overrides it. Returns the exit code: 0, 1 on failure, 2 on
// a usage error.
int Run(const std::vector<std::string>& args, const std::string& default_socket,
        std::ostream& out, std::ostream& err);

}  // namespace kmodd::agentctl

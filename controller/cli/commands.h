#pragma once

// kmodd-controller subcommands. Each takes its own arguments (after the subcommand name)
// and returns the process exit code; output goes to the given streams.

#include <iosfwd>
#include <string>
#include <vector>

namespace kmodd::cli {

int ValidateCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int PlanCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int StatusCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int PreflightCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int BuildCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int SignCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RolloutCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace kmodd::cli

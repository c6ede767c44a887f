#pragma once

#include <string>
#include <vector>

namespace kmodd::agent {

int ApplyCommand(const std::vector<std::string>& args);
int CleanupCommand(const std::vector<std::string>& args);
int PullCommand(const std::vector<std::string>& args);
int RunCommand(const std::vector<std::string>& args);
int WatchCommand(const std::vector<std::string>& args);

}  // namespace kmodd::agent

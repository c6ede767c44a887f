#pragma once

#include <iostream>
#include <string>
#include <vector>

namespace kmodd::agent {

int ApplyCommand(const std::vector<std::string>& args);
int CleanupCommand(const std::vector<std::string>& args);
int PullCommand(const std::vector<std::string>& args);
int RunCommand(const std::vector<std::string>& args);
int WatchCommand(const std::vector<std::string>& args);

// The end of every command's flag loop, for an argument no flag took: -h/--help prints the
// usage (exit 0); anything else is named, with the usage (exit 2).
inline int HelpOrUnexpected(const std::string& arg, const char* usage) {
  if (arg == "-h" || arg == "--help") {
    std::cout << usage;
    return 0;
  }
  std::cerr << "error: unexpected argument \"" << arg << "\"\n" << usage;
  return 2;
}

}  // namespace kmodd::agent

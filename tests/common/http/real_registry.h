#pragma once
// A real registry (Debian's docker-registry, tools/registry/start MODE) in a temporary
// directory for the length of a test, and a shell runner. Header-only: the unit binary
// compiles *_test.cc only. Without the registry, tests using it fail: they never skip.

#include <catch2/catch.hpp>

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <utility>

#include "tests/source_dir.h"
#include "tests/temp_dir.h"

namespace kmodd::testing {

// Runs a command through the shell; returns its exit status and everything it printed.
inline std::pair<int, std::string> Run(const std::string& command) {
  std::string out;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) {
    out.append(buf, n);
  }
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// A registry in a temporary directory for the length of a test.
class Registry {
 public:
  explicit Registry(const std::string& mode) {
    const auto [code, out] =
        Run(std::string(KMODD_SOURCE_DIR) + "/tools/registry/start " + mode + " " + dir_.path);
    if (code != 0) {
      // (The directory goes with dir_: a member is destroyed even when the constructor throws.)
      FAIL("tools/registry/start " << mode << " failed:\n" << out);
    }
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      if (const size_t eq = line.find('='); eq != std::string::npos) {
        env_[line.substr(0, eq)] = line.substr(eq + 1);
      }
    }
    REQUIRE(!Env("KMODD_REGISTRY").empty());
  }
  ~Registry() {
    Run(std::string(KMODD_SOURCE_DIR) + "/tools/registry/stop " + dir_.path);
  }
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  std::string Env(const std::string& key) const {
    const auto it = env_.find(key);
    return it == env_.end() ? "" : it->second;
  }
  std::string Url(const std::string& path) const { return Env("KMODD_REGISTRY_URL") + path; }

 private:
  TempDir dir_{"registry-test"};
  std::map<std::string, std::string> env_;
};

}  // namespace kmodd::testing

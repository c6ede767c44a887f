#pragma once

// A fresh directory under /tmp for one test (/tmp/kmodd-TAG-XXXXXX), removed with
// everything in it when the test's scope ends. The one temporary directory of the unit
// tests: rigs hold one as a member, tests as a local.

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

namespace kmodd::testing {

struct TempDir {
  // Throws when no directory can be made: a test must never go on with an empty path and
  // write under "/".
  explicit TempDir(const std::string& tag = "test") {
    std::string tmpl = "/tmp/kmodd-" + tag + "-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      throw std::runtime_error("mkdtemp " + tmpl + ": " + std::strerror(errno));
    }
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // The path of `rel` in this directory.
  std::string operator/(const std::string& rel) const { return path + "/" + rel; }

  // Writes `content` to `rel` (its directory must exist); returns its path.
  std::string Write(const std::string& rel, const std::string& content) const {
    const std::string p = *this / rel;
    std::ofstream(p) << content;
    return p;
  }

  std::string path;
};

}  // namespace kmodd::testing

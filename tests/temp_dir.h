#pragma once

// A fresh directory under /tmp for one test (/tmp/kmodd-TAG-XXXXXX), removed with
// everything in it when the test's scope ends.

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace kmodd::testing {

struct TempDir {
  explicit TempDir(const std::string& tag = "test") {
    std::string tmpl = "/tmp/kmodd-" + tag + "-XXXXXX";
    path = mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) {
      std::filesystem::remove_all(path, ec);
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path;  // "" when mkdtemp failed (the test's first write then fails loudly)
};

}  // namespace kmodd::testing

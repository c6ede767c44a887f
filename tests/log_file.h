#pragma once

// A Logger whose lines a test reads back: it writes to a temporary file.

#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "common/log.h"

namespace kmodd::testing {

struct LogFile {
  LogFile() : file(std::tmpfile()), log(file) { REQUIRE(file != nullptr); }
  ~LogFile() { std::fclose(file); }
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;

  // Everything logged so far.
  std::string Text() {
    std::fflush(file);
    std::rewind(file);
    std::string out;
    char buf[4096];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, file)) > 0) {
      out.append(buf, n);
    }
    std::fseek(file, 0, SEEK_END);
    return out;
  }

  std::FILE* file;
  Logger log;
};

}  // namespace kmodd::testing

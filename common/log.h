#pragma once

// Structured logs for the daemons: one JSON object per line on stderr,
//   {"ts":"2026-12-01T02:22:55.123Z","level":"info","msg":"module loaded","module":"a/b",...}
// Log once, at the layer that decides (STYLE.md): adapters return Status, callers log.
// Thread-safe; a Logger is passed down by reference, there is no global one.

#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/value.h"

namespace kmodd {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

class Logger {
 public:
  explicit Logger(std::FILE* out = stderr, LogLevel min = LogLevel::kInfo)
      : out_(out), min_(min) {}

  using Fields = std::vector<std::pair<std::string, Value>>;

  void Log(LogLevel level, std::string_view msg, const Fields& fields = {});
  void Debug(std::string_view msg, const Fields& fields = {}) { Log(LogLevel::kDebug, msg, fields); }
  void Info(std::string_view msg, const Fields& fields = {}) { Log(LogLevel::kInfo, msg, fields); }
  void Warn(std::string_view msg, const Fields& fields = {}) { Log(LogLevel::kWarn, msg, fields); }
  void Error(std::string_view msg, const Fields& fields = {}) { Log(LogLevel::kError, msg, fields); }

  void set_min(LogLevel min) { min_ = min; }

 private:
  std::mutex mu_;
  std::FILE* out_;
  LogLevel min_;
};

// "2026-12-01T02:22:55.123Z": UTC, milliseconds, as logs and status documents write time.
std::string Rfc3339Millis(int64_t unix_ms);

// One log line (without the newline): what Log writes, for tests.
std::string FormatLogLine(int64_t unix_ms, LogLevel level, std::string_view msg,
                          const Logger::Fields& fields);

}  // namespace kmodd

#include "common/log.h"

#include <chrono>
#include <ctime>

namespace kmodd {

namespace {

const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}


}  // namespace

std::string Rfc3339Millis(int64_t unix_ms) {
  const std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(unix_ms % 1000));
  return buf;
}

std::string FormatLogLine(int64_t unix_ms, LogLevel level, std::string_view msg,
                          const Logger::Fields& fields) {
  Value line = Value::EmptyMap();
  line.Set("ts", Rfc3339Millis(unix_ms));
  line.Set("level", LevelName(level));
  line.Set("msg", msg);
  for (const auto& [k, v] : fields) {
    line.Set(k, v);
  }
  return ToJsonLine(line);
}

void Logger::Log(LogLevel level, std::string_view msg, const Fields& fields) {
  if (level < min_) {
    return;
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const std::string line = FormatLogLine(now, level, msg, fields) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

}  // namespace kmodd

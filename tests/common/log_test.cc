#include <catch2/catch.hpp>

#include "common/log.h"

TEST_CASE("a log line is one JSON object on one line, fields in the order given") {
  const std::string line =
      kmodd::FormatLogLine(1764555775123, kmodd::LogLevel::kWarn, "module failed",
                           {{"module", "gpu/i915"}, {"attempt", 3}, {"why", "a \"quoted\"\nline"}});
  CHECK(line ==
        "{\"ts\":\"2025-12-01T02:22:55.123Z\",\"level\":\"warn\",\"msg\":\"module failed\","
        "\"module\":\"gpu/i915\",\"attempt\":3,\"why\":\"a \\\"quoted\\\"\\nline\"}");
}

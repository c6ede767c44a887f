#pragma once

// What a fan-out measurement reports: pure arithmetic over the per-agent times.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kmodd::loadgen {

struct Summary {
  int agents = 0;
  int connected = 0;
  int acked = 0;  // agents that ACKed a changed desired state
  std::optional<int64_t> first_ms;
  std::optional<int64_t> p50_ms;
  std::optional<int64_t> p99_ms;
  std::optional<int64_t> all_ms;  // only when every agent ACKed
  bool timed_out = false;
};

// `acked_unix_ms` holds, per agent that ACKed a changed desired state, when it did;
// times are measured from `since_unix_ms`. Percentiles are nearest-rank.
Summary Summarize(int agents, int connected, std::vector<int64_t> acked_unix_ms,
                  int64_t since_unix_ms, bool timed_out);

// {"agents":N,"connected":..,"acked":..,"first_ms":..,"p50_ms":..,"p99_ms":..,"all_ms":..,
//  "timed_out":false} on one line; unknown figures are null.
std::string SummaryJson(const Summary& s);

}  // namespace kmodd::loadgen

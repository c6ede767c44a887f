#include "tools/loadgen/summary.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace kmodd::loadgen {

namespace {

int64_t NearestRank(const std::vector<int64_t>& sorted, double p) {
  const auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

std::string Field(const char* name, const std::optional<int64_t>& v) {
  return absl::StrCat("\"", name, "\":", v ? absl::StrCat(*v) : "null");
}

}  // namespace

Summary Summarize(int agents, int connected, std::vector<int64_t> acked_unix_ms,
                  int64_t since_unix_ms, bool timed_out) {
  Summary s;
  s.agents = agents;
  s.connected = connected;
  s.acked = static_cast<int>(acked_unix_ms.size());
  s.timed_out = timed_out;
  if (acked_unix_ms.empty()) {
    return s;
  }
  for (auto& t : acked_unix_ms) {
    t -= since_unix_ms;
  }
  std::sort(acked_unix_ms.begin(), acked_unix_ms.end());
  s.first_ms = acked_unix_ms.front();
  s.p50_ms = NearestRank(acked_unix_ms, 0.50);
  s.p99_ms = NearestRank(acked_unix_ms, 0.99);
  if (s.acked == agents) {
    s.all_ms = acked_unix_ms.back();
  }
  return s;
}

std::string SummaryJson(const Summary& s) {
  return absl::StrCat("{\"agents\":", s.agents, ",\"connected\":", s.connected, ",\"acked\":",
                      s.acked, ",", Field("first_ms", s.first_ms), ",",
                      Field("p50_ms", s.p50_ms), ",", Field("p99_ms", s.p99_ms), ",",
                      Field("all_ms", s.all_ms), ",\"timed_out\":",
                      s.timed_out ? "true" : "false", "}");
}

}  // namespace kmodd::loadgen

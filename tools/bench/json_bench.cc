// JSON parser benchmark: a Node watch event with N labels (100,000 by default), parsed as
// the controller parses every Node event (common/json). Prints the median and the 90th
// percentile of repeated parses, and the bytes of the event.
//
//   taskset -c 0 build/bin/json_bench [--labels N] [--runs R]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "common/flags.h"
#include "common/json.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string NodeEvent(int labels) {
  std::string s = R"({"type":"MODIFIED","object":{"kind":"Node","apiVersion":"v1",)"
                  R"("metadata":{"name":"worker-1","uid":"u","resourceVersion":"7","labels":{)";
  for (int i = 0; i < labels; ++i) {
    if (i > 0) {
      s += ',';
    }
    s += "\"example.com/label-" + std::to_string(i) + "\":\"value-" + std::to_string(i) + "\"";
  }
  s += R"(}},"status":{"nodeInfo":{"kernelVersion":"6.1.0-31-cloud-amd64"}}}})";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int labels = 100000;
  int runs = 11;
  kmodd::flags::FlagSet flags("json_bench", "usage: json_bench [--labels N] [--runs R]\n");
  flags.Int("--labels", "N", "labels of the Node (default 100000)", &labels, {0});
  flags.Int("--runs", "R", "parses (default 11)", &runs, {1});
  if (std::optional<int> exit =
          flags.ParseOrExit(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr)) {
    return *exit;
  }
  const std::string event = NodeEvent(labels);
  std::vector<double> ms;
  for (int r = 0; r < runs; ++r) {
    const auto start = Clock::now();
    absl::StatusOr<kmodd::Value> v = kmodd::ParseJson(event);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (!v.ok()) {
      std::fprintf(stderr, "parse failed: %s\n", std::string(v.status().message()).c_str());
      return 1;
    }
  }
  std::sort(ms.begin(), ms.end());
  std::printf("labels=%d bytes=%zu runs=%d median_ms=%.2f p90_ms=%.2f\n", labels, event.size(),
              runs, ms[ms.size() / 2], ms[std::min(ms.size() - 1, ms.size() * 9 / 10)]);
  return 0;
}

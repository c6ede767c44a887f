// JSON parser benchmark: a Node watch event with N labels (100,000 by default), parsed as
// the controller parses every Node event (common/json). Prints the median and the 90th
// percentile of repeated parses, and the bytes of the event.
//
//   taskset -c 0 build/bin/json_bench [--labels N] [--runs R]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--labels") == 0) {
      labels = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--runs") == 0) {
      runs = std::atoi(argv[i + 1]);
    }
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

// kmodd-agent watch: prints the kernel's module load/unload events as they arrive. A
// debugging aid, and how the real-kernel tests prove drift is seen within milliseconds.

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/flags.h"
#include "node-agent/cli/commands.h"
#include "node-agent/kernel/udev_monitor.h"

namespace kmodd::agent {

namespace {

constexpr char kUsage[] =
    "usage: kmodd-agent watch [--count N] [--timeout SECONDS] [-o text|json]\n"
    "  Prints one line per module add/remove event from the kernel (uevent netlink; no\n"
    "  udevd needed), with the CLOCK_MONOTONIC time it was received, in microseconds.\n"
    "  Says \"listening\" on stderr once subscribed: events before that are not seen.\n";

int64_t MonotonicMicros(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

// Module names are [A-Za-z0-9_-] in practice; escape anyway rather than trust that.
std::string JsonEscaped(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out;
}

void Print(const kernel::ModuleEvent& e, bool json) {
  const int64_t us = MonotonicMicros(e.received);
  if (json) {
    // JSON lines (ToJson indents). Flushed per event: a reader may be waiting for it.
    std::cout << "{\"action\":\"" << kernel::ActionName(e.action) << "\",\"module\":\""
              << JsonEscaped(e.module) << "\",\"seqnum\":" << e.seqnum
              << ",\"monotonicUs\":" << us << "}" << std::endl;
  } else {
    std::cout << absl::StrFormat("%d.%06d  %-6s  %s", us / 1000000, us % 1000000,
                                 kernel::ActionName(e.action), e.module)
              << std::endl;
  }
}

}  // namespace

int WatchCommand(const std::vector<std::string>& args) {
  int64_t count = -1;
  absl::Duration timeout = absl::InfiniteDuration();
  std::string format = "text";
  flags::FlagSet flags("kmodd-agent watch", kUsage);
  flags.Int("--count", "N", "exit after N events (exit 1 if the timeout comes first)", &count,
            {1});
  flags.Duration("--timeout", "SECONDS", "exit after this long (default: never)", &timeout,
                 absl::ZeroDuration(), absl::Seconds(1e8));
  flags.OneOf("-o,--output", "FORMAT",
              "text (default), or json: JSON lines\n"
              "{\"action\",\"module\",\"seqnum\",\"monotonicUs\"}",
              &format, {"text", "json"});
  if (std::optional<int> exit = flags.ParseOrExit(args, std::cout, std::cerr)) {
    return *exit;
  }
  const double timeout_s =
      timeout == absl::InfiniteDuration() ? -1 : absl::ToDoubleSeconds(timeout);
  auto monitor = kernel::UdevMonitor::Open();
  if (!monitor.ok()) {
    std::cerr << "error: " << monitor.status().message() << "\n";
    return 1;
  }
  std::cerr << "kmodd-agent watch: listening for module events" << std::endl;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline =
      start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::duration<double>(timeout_s < 0 ? 0 : timeout_s));
  int64_t seen = 0;
  while (count < 0 || seen < count) {
    int wait_ms = -1;
    if (timeout_s >= 0) {
      const auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) {
        break;
      }
      // Rounded up, so that the loop does not spin through the last millisecond; at most a
      // minute at a time, so that a huge --timeout cannot overflow poll's int.
      wait_ms = static_cast<int>(std::min<int64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1, 60000));
    }
    pollfd p{monitor->fd(), POLLIN, 0};
    if (int n = poll(&p, 1, wait_ms); n < 0) {
      if (errno == EINTR) {
        continue;
      }
      std::cerr << "error: poll: " << std::strerror(errno) << "\n";
      return 1;
    }
    for (;;) {
      auto e = monitor->Receive();
      if (absl::IsUnavailable(e.status())) {
        std::cerr << "warning: " << e.status().message() << "\n";  // lost some; go on
        continue;
      }
      if (!e.ok()) {
        std::cerr << "error: " << e.status().message() << "\n";
        return 1;
      }
      if (!e->has_value()) {
        break;
      }
      Print(**e, format == "json");
      if (++seen == count) {
        break;
      }
    }
  }
  if (count >= 0 && seen < count) {
    std::cerr << "error: " << seen << " of " << count << " event(s) before the timeout\n";
    return 1;
  }
  return 0;
}

}  // namespace kmodd::agent

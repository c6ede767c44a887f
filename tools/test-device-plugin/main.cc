// kmodd-test-device-plugin: a device plugin for tests, advertising N devices of
// kmodd.test/<name> to the kubelet. See tools/test-device-plugin/README.md.

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "tools/test-device-plugin/options.h"
#include "tools/test-device-plugin/runner.h"

int main(int argc, char** argv) {
  using kmodd::test_device_plugin::ParseOptions;
  absl::StatusOr<kmodd::test_device_plugin::Options> options =
      ParseOptions(std::vector<std::string>(argv + 1, argv + argc));
  if (!options.ok()) {
    if (absl::IsCancelled(options.status())) {  // --help: the message is the help
      std::fputs(std::string(options.status().message()).c_str(), stdout);
      return 0;
    }
    std::fprintf(stderr, "kmodd-test-device-plugin: %s\n",
                 std::string(options.status().message()).c_str());
    return 2;
  }

  // Blocked before any thread starts, so that only the waiter below takes them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  kmodd::RealClock clock;
  kmodd::Logger log;
  kmodd::test_device_plugin::Runner runner(*options, clock, log);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    runner.Stop();
  });
  log.Info("starting", {{"resource", options->resource},
                        {"devices", options->count},
                        {"plugin_dir", options->plugin_dir},
                        {"kubelet", runner.kubelet_socket()}});
  absl::Status s = runner.Run();
  // Wake the waiter when Run ended on its own. Process-directed: if the waiter already took
  // a signal and returned, this one stays pending, blocked, and harmless.
  kill(getpid(), SIGTERM);
  waiter.join();
  if (!s.ok()) {
    log.Error("stopped", {{"error", std::string(s.message())}});
    return 1;
  }
  log.Info("stopped", {});
  return 0;
}

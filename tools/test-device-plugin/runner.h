#pragma once

// The plugin's life beside the kubelet: serve DevicePlugin on our socket in the kubelet's
// device-plugin directory, Register with the kubelet, then watch. The kubelet empties that
// directory when it starts, so a vanished socket of ours or a new kubelet.sock means
// "serve again and register again"; the health file is read on the same tick.

#include <condition_variable>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "common/clock.h"
#include "common/log.h"
#include "tools/test-device-plugin/devices.h"
#include "tools/test-device-plugin/options.h"

namespace kmodd::test_device_plugin {

class Runner {
 public:
  Runner(const Options& options, const Clock& clock, Logger& log);

  // Until Stop(): returns OK then, or an error it cannot retry (our socket cannot be
  // created because the path is not ours to remove).
  [[nodiscard]] absl::Status Run();
  // Thread-safe; Run returns within one poll interval.
  void Stop();

  // Our socket for the n-th serve: <plugin-dir>/kmodd-test-<name>-<n>.sock. A new name each
  // time because gRPC unlinks a unix listener's path when it tears the listener down, which
  // can happen after Server::Wait returns: with one name it could remove the next server's.
  std::string SocketName(int generation) const;
  std::string kubelet_socket() const { return kubelet_socket_; }

 private:
  // Serve, register and watch (Run, less the health server).
  absl::Status Serve();
  // The health as the file says now; `previous` when the file cannot be read or parsed
  // (logged once per distinct error).
  Health ReadHealth(const Health& previous);
  // Waits one poll interval or until Stop(); true when stopped.
  bool Sleep();
  bool stopped();

  const Options& options_;
  const Clock& clock_;
  Logger& log_;
  const std::vector<std::string> ids_;
  const std::string kubelet_socket_;
  std::string last_health_error_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
};

}  // namespace kmodd::test_device_plugin

#pragma once

// Kernel events into reconciles: every module uevent (someone ran rmmod, a module loaded
// behind kmodd's back) kicks the reconciler at once and is an event for `agentctl events`;
// lost events (the kernel's buffer overflowed) kick it too, since only a whole new look at
// the kernel can tell what they said. Runs on the daemon's Asio loop: Receive never blocks.

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <functional>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "common/log.h"
#include "node-agent/kernel/devices.h"
#include "node-agent/kernel/udev_monitor.h"
#include "node-agent/server/agent_state.h"

namespace kmodd::agent {

// Where module events come from: the kernel's uevents (UdevEvents) in the daemon.
class ModuleEvents {
 public:
  virtual ~ModuleEvents() = default;
  // Readable when Receive has something.
  virtual int fd() const = 0;
  // The next event, nullopt when none is waiting; Unavailable when events were lost.
  [[nodiscard]] virtual absl::StatusOr<std::optional<kernel::ModuleEvent>> Receive() = 0;
};

class UdevEvents final : public ModuleEvents {
 public:
  explicit UdevEvents(kernel::UdevMonitor monitor) : monitor_(std::move(monitor)) {}
  int fd() const override { return monitor_.fd(); }
  absl::StatusOr<std::optional<kernel::ModuleEvent>> Receive() override {
    return monitor_.Receive();
  }

 private:
  kernel::UdevMonitor monitor_;
};

class UdevWatch {
 public:
  // `kick` asks for a reconcile (Reconciler::Kick); called on the Asio loop.
  UdevWatch(boost::asio::io_context& io, std::unique_ptr<ModuleEvents> events,
            std::function<void()> kick, AgentState& state, Logger& log);
  ~UdevWatch();
  UdevWatch(const UdevWatch&) = delete;
  UdevWatch& operator=(const UdevWatch&) = delete;

  // Starts watching: each time the descriptor is readable, every waiting event is taken
  // and the reconciler kicked once for them.
  void Arm();

 private:
  void Drain();

  std::unique_ptr<ModuleEvents> events_;
  boost::asio::posix::stream_descriptor fd_;
  std::function<void()> kick_;
  AgentState& state_;
  Logger& log_;
};

// Device uevents into readiness checks (server/readiness.h): on each burst of uevents of
// devices with a node, `changed` (Reconciler::DevicesChanged) has device checks read udev's
// list again. Runs on the daemon's Asio loop.
class DeviceWatch {
 public:
  DeviceWatch(boost::asio::io_context& io, kernel::DeviceEvents events,
              std::function<void()> changed);
  ~DeviceWatch();
  DeviceWatch(const DeviceWatch&) = delete;
  DeviceWatch& operator=(const DeviceWatch&) = delete;

  void Arm();

 private:
  kernel::DeviceEvents events_;
  boost::asio::posix::stream_descriptor fd_;
  std::function<void()> changed_;
};

}  // namespace kmodd::agent

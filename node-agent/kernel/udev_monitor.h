#pragma once

// Module load/unload events straight from the kernel (the uevent netlink socket, through
// libudev), so that drift (someone ran rmmod) is seen within milliseconds. The kernel
// source needs no udevd. Raw libudev types do not leave node-agent/kernel/.

#include <libudev.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kmodd::kernel {

struct UdevDeleter {
  void operator()(udev* u) const { udev_unref(u); }
};
struct UdevMonitorDeleter {
  void operator()(udev_monitor* m) const { udev_monitor_unref(m); }
};
struct UdevDeviceDeleter {
  void operator()(udev_device* d) const { udev_device_unref(d); }
};

using UdevHandle = std::unique_ptr<udev, UdevDeleter>;
using UdevMonitorHandle = std::unique_ptr<udev_monitor, UdevMonitorDeleter>;
using UdevDeviceHandle = std::unique_ptr<udev_device, UdevDeviceDeleter>;

struct ModuleEvent {
  enum class Action { kAdd, kRemove };
  Action action = Action::kAdd;
  std::string module;  // as the kernel names it (/sys/module/<module>)
  // When this process received the event (CLOCK_MONOTONIC): the kernel puts no time in
  // module uevents, and receipt is what bounds how late drift is seen.
  std::chrono::steady_clock::time_point received;
  uint64_t seqnum = 0;  // the kernel's uevent sequence number (orders events)
};

const char* ActionName(ModuleEvent::Action a);

class UdevMonitor {
 public:
  // Subscribes to the kernel's uevents of subsystem "module". Events that happen before
  // Open returns are not seen: observe the whole state after opening, not before.
  [[nodiscard]] static absl::StatusOr<UdevMonitor> Open();

  // A non-blocking descriptor that becomes readable when Receive has something; for
  // poll(2) or an Asio stream descriptor. Owned by the monitor.
  int fd() const;

  // The next module event, or nullopt when none is waiting (never blocks). Unavailable
  // when the kernel dropped events (receive buffer overflow): the caller must observe the
  // whole state again, as the events alone no longer describe it.
  [[nodiscard]] absl::StatusOr<std::optional<ModuleEvent>> Receive();

 private:
  UdevMonitor(UdevHandle udev, UdevMonitorHandle monitor);

  UdevHandle udev_;
  UdevMonitorHandle monitor_;
};

}  // namespace kmodd::kernel

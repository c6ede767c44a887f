#pragma once

// Device nodes as udev sees them, for readiness checks (api/readiness.h, kind devices):
// the list comes from libudev's enumeration of sysfs (each device's DEVNAME, under /dev),
// and DeviceEvents says when it may have changed (every kernel uevent with a device node),
// so that a check sees a device appear when the kernel announces it, without polling /dev.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "node-agent/kernel/udev_monitor.h"

namespace kmodd::kernel {

// The device nodes of every device udev knows, sorted ("/dev/dri/renderD128", ...).
[[nodiscard]] absl::StatusOr<std::vector<std::string>> ListDeviceNodes();

// Those of `nodes` that match the fnmatch(3) pattern `glob` (FNM_PATHNAME: '*' stops at '/').
std::vector<std::string> MatchDeviceNodes(const std::vector<std::string>& nodes,
                                          const std::string& glob);

// The kernel's uevents of devices with a node (add, remove, change of any subsystem).
class DeviceEvents {
 public:
  [[nodiscard]] static absl::StatusOr<DeviceEvents> Open();

  // Non-blocking; readable when events wait.
  int fd() const;
  // Takes every waiting event; true if any had a device node (or events were lost).
  bool Drain();

 private:
  DeviceEvents(UdevHandle udev, UdevMonitorHandle monitor);

  UdevHandle udev_;
  UdevMonitorHandle monitor_;
};

}  // namespace kmodd::kernel

#include "node-agent/kernel/devices.h"

#include <fnmatch.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kmodd::kernel {

namespace {

struct EnumerateDeleter {
  void operator()(udev_enumerate* e) const { udev_enumerate_unref(e); }
};

}  // namespace

absl::StatusOr<std::vector<std::string>> ListDeviceNodes() {
  UdevHandle u(udev_new());
  if (!u) {
    return absl::ResourceExhaustedError(absl::StrCat("udev_new failed: ", std::strerror(errno)));
  }
  std::unique_ptr<udev_enumerate, EnumerateDeleter> e(udev_enumerate_new(u.get()));
  if (!e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("udev_enumerate_new failed: ", std::strerror(errno)));
  }
  if (int err = udev_enumerate_scan_devices(e.get()); err < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot list devices through udev (sysfs): ", std::strerror(-err)));
  }
  std::vector<std::string> out;
  udev_list_entry* entry = nullptr;
  udev_list_entry_foreach(entry, udev_enumerate_get_list_entry(e.get())) {
    UdevDeviceHandle d(udev_device_new_from_syspath(u.get(), udev_list_entry_get_name(entry)));
    if (!d) {
      continue;  // gone since the scan
    }
    if (const char* node = udev_device_get_devnode(d.get()); node != nullptr) {
      out.emplace_back(node);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> MatchDeviceNodes(const std::vector<std::string>& nodes,
                                          const std::string& glob) {
  std::vector<std::string> out;
  for (const std::string& n : nodes) {
    if (fnmatch(glob.c_str(), n.c_str(), FNM_PATHNAME) == 0) {
      out.push_back(n);
    }
  }
  return out;
}

DeviceEvents::DeviceEvents(UdevHandle udev, UdevMonitorHandle monitor)
    : udev_(std::move(udev)), monitor_(std::move(monitor)) {}

absl::StatusOr<DeviceEvents> DeviceEvents::Open() {
  UdevHandle u(udev_new());
  if (!u) {
    return absl::ResourceExhaustedError(absl::StrCat("udev_new failed: ", std::strerror(errno)));
  }
  // "kernel": the uevents as the kernel sends them; devtmpfs has made the node by then.
  UdevMonitorHandle m(udev_monitor_new_from_netlink(u.get(), "kernel"));
  if (!m) {
    return absl::UnavailableError(absl::StrCat(
        "cannot open the kernel uevent netlink socket: ", std::strerror(errno)));
  }
  if (int err = udev_monitor_enable_receiving(m.get()); err < 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot subscribe to kernel uevents (netlink bind): ", std::strerror(-err)));
  }
  return DeviceEvents(std::move(u), std::move(m));
}

int DeviceEvents::fd() const { return udev_monitor_get_fd(monitor_.get()); }

bool DeviceEvents::Drain() {
  bool any = false;
  for (int i = 0; i < 10000; ++i) {  // bounded: a storm of events does not hold the loop
    errno = 0;
    UdevDeviceHandle d(udev_monitor_receive_device(monitor_.get()));
    if (!d) {
      // ENOBUFS: events were lost; the list must be read again.
      return any || errno == ENOBUFS;
    }
    any = any || udev_device_get_devnode(d.get()) != nullptr;
  }
  return true;
}

}  // namespace kmodd::kernel

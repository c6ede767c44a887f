#include "node-agent/kernel/udev_monitor.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace kmodd::kernel {

namespace {

// Loading a whole driver stack emits a burst of uevents; the default socket buffer holds
// a few hundred. Larger needs CAP_NET_ADMIN (the agent has it); without, the default stays
// and an overflow is reported by Receive.
constexpr int kReceiveBufferBytes = 4 << 20;

std::string_view Property(udev_device* d, const char* key) {
  const char* v = udev_device_get_property_value(d, key);
  return v != nullptr ? std::string_view(v) : std::string_view();
}

}  // namespace

const char* ActionName(ModuleEvent::Action a) {
  return a == ModuleEvent::Action::kAdd ? "add" : "remove";
}

UdevMonitor::UdevMonitor(UdevHandle udev, UdevMonitorHandle monitor)
    : udev_(std::move(udev)), monitor_(std::move(monitor)) {}

absl::StatusOr<UdevMonitor> UdevMonitor::Open() {
  UdevHandle u(udev_new());
  if (!u) {
    return absl::ResourceExhaustedError(
        absl::StrCat("udev_new failed: ", std::strerror(errno)));
  }
  // "kernel": the raw uevents the kernel multicasts, not udevd's processed ones.
  UdevMonitorHandle m(udev_monitor_new_from_netlink(u.get(), "kernel"));
  if (!m) {
    return absl::UnavailableError(absl::StrCat(
        "cannot open the kernel uevent netlink socket: ", std::strerror(errno)));
  }
  if (int err = udev_monitor_filter_add_match_subsystem_devtype(m.get(), "module", nullptr);
      err < 0) {
    return absl::InternalError(
        absl::StrCat("udev monitor filter on subsystem module: ", std::strerror(-err)));
  }
  (void)udev_monitor_set_receive_buffer_size(m.get(), kReceiveBufferBytes);
  if (int err = udev_monitor_enable_receiving(m.get()); err < 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot subscribe to kernel uevents (netlink bind): ", std::strerror(-err)));
  }
  return UdevMonitor(std::move(u), std::move(m));
}

int UdevMonitor::fd() const { return udev_monitor_get_fd(monitor_.get()); }

absl::StatusOr<std::optional<ModuleEvent>> UdevMonitor::Receive() {
  for (;;) {
    errno = 0;
    UdevDeviceHandle d(udev_monitor_receive_device(monitor_.get()));
    const int err = errno;
    const auto now = std::chrono::steady_clock::now();
    if (!d) {
      if (err == EAGAIN || err == EWOULDBLOCK || err == 0) {
        return std::optional<ModuleEvent>();
      }
      if (err == EINTR) {
        continue;
      }
      if (err == ENOBUFS) {
        return absl::UnavailableError(
            "module events were lost (uevent receive buffer overflow): observe the whole "
            "state again");
      }
      return absl::UnknownError(
          absl::StrCat("receiving a kernel uevent: ", std::strerror(err)));
    }
    // The kernel-side (BPF) filter lets every kernel message through and libudev filters
    // those in userspace; checking again costs nothing. Modules have no other actions
    // today, but "change" or "bind" would not be drift.
    const char* subsystem = udev_device_get_subsystem(d.get());
    const char* action = udev_device_get_action(d.get());
    const char* name = udev_device_get_sysname(d.get());
    if (subsystem == nullptr || std::string_view(subsystem) != "module" || action == nullptr ||
        name == nullptr) {
      continue;
    }
    ModuleEvent e;
    if (std::string_view(action) == "add") {
      e.action = ModuleEvent::Action::kAdd;
    } else if (std::string_view(action) == "remove") {
      e.action = ModuleEvent::Action::kRemove;
    } else {
      continue;
    }
    e.module = name;
    e.received = now;
    const std::string seqnum(Property(d.get(), "SEQNUM"));
    e.seqnum = seqnum.empty() ? 0 : std::strtoull(seqnum.c_str(), nullptr, 10);
    return std::optional<ModuleEvent>(std::move(e));
  }
}

}  // namespace kmodd::kernel

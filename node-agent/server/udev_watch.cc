#include "node-agent/server/udev_watch.h"

#include "absl/strings/str_cat.h"

namespace kmodd::agent {

UdevWatch::UdevWatch(boost::asio::io_context& io, std::unique_ptr<ModuleEvents> events,
                     std::function<void()> kick, AgentState& state, Logger& log)
    : events_(std::move(events)), fd_(io, events_->fd()), kick_(std::move(kick)), state_(state),
      log_(log) {}

// The events source owns the descriptor: Asio lets go of it without closing it.
UdevWatch::~UdevWatch() { (void)fd_.release(); }

void UdevWatch::Arm() {
  fd_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                 [this](boost::system::error_code ec) {
                   if (ec) {
                     return;
                   }
                   Drain();
                   Arm();
                 });
}

void UdevWatch::Drain() {
  bool changed = false;
  for (;;) {
    auto e = events_->Receive();
    if (!e.ok()) {
      log_.Warn("kernel events lost; reconciling the whole state",
                {{"error", std::string(e.status().message())}});
      changed = true;
      continue;
    }
    if (!e->has_value()) {
      break;
    }
    changed = true;
    state_.AddEvent(AgentEvent{0, "KernelChanged", "",
                               absl::StrCat(kernel::ActionName((*e)->action), " ", (*e)->module),
                               {}, 0, 0});
  }
  if (changed) {
    kick_();
  }
}

DeviceWatch::DeviceWatch(boost::asio::io_context& io, kernel::DeviceEvents events,
                         std::function<void()> changed)
    : events_(std::move(events)), fd_(io, events_.fd()), changed_(std::move(changed)) {}

DeviceWatch::~DeviceWatch() { (void)fd_.release(); }

void DeviceWatch::Arm() {
  fd_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                 [this](boost::system::error_code ec) {
                   if (ec) {
                     return;
                   }
                   if (events_.Drain()) {
                     changed_();
                   }
                   Arm();
                 });
}

}  // namespace kmodd::agent

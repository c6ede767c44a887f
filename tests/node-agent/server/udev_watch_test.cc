// The udev watch (node-agent/server/udev_watch.h) on a real Asio loop, with module events
// from a pipe: kernel events kick the reconciler once per burst and are agent events. (The
// real uevent socket is proven in the VM: e2e udev-drift.)

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <deque>

#include "node-agent/server/udev_watch.h"
#include "tests/fakes/fake_clock.h"

using kmodd::kernel::ModuleEvent;

namespace {

// Events queued by the test; the pipe is readable while any wait.
class PipeEvents final : public kmodd::agent::ModuleEvents {
 public:
  PipeEvents() {
    REQUIRE(::pipe2(fds_, O_NONBLOCK | O_CLOEXEC) == 0);
  }
  ~PipeEvents() override {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  int fd() const override { return fds_[0]; }
  absl::StatusOr<std::optional<ModuleEvent>> Receive() override {
    if (queue_.empty()) {
      char buf[64];
      while (::read(fds_[0], buf, sizeof buf) > 0) {
      }
      return std::nullopt;
    }
    auto next = queue_.front();
    queue_.pop_front();
    return next;
  }
  void Push(absl::StatusOr<std::optional<ModuleEvent>> e) {
    queue_.push_back(std::move(e));
    REQUIRE(::write(fds_[1], "x", 1) == 1);
  }

 private:
  int fds_[2] = {-1, -1};
  std::deque<absl::StatusOr<std::optional<ModuleEvent>>> queue_;
};

ModuleEvent Event(ModuleEvent::Action action, const std::string& module) {
  ModuleEvent e;
  e.action = action;
  e.module = module;
  return e;
}

std::vector<std::string> Messages(kmodd::agent::EventSubscription& sub,
                                  const kmodd::Clock& clock) {
  std::vector<std::string> out;
  for (const auto& e : sub.Next(clock.MonotonicNow())) {
    out.push_back(e.kind + ": " + e.message);
  }
  return out;
}

}  // namespace

TEST_CASE("a burst of kernel module events kicks the reconciler once and is in the events",
          "[server][udev]") {
  kmodd::FakeClock clock;
  kmodd::agent::AgentState state(clock);
  auto sub = state.Subscribe(false);
  std::FILE* devnull = std::fopen("/dev/null", "w");
  {
    kmodd::Logger log{devnull};
    boost::asio::io_context io;
    auto events = std::make_unique<PipeEvents>();
    PipeEvents& pipe = *events;
    int kicks = 0;
    kmodd::agent::UdevWatch watch(io, std::move(events), [&] { ++kicks; }, state, log);
    watch.Arm();
    CHECK(io.poll() == 0);  // nothing yet: nothing runs
    CHECK(kicks == 0);

    pipe.Push(Event(ModuleEvent::Action::kRemove, "mod_a"));
    pipe.Push(Event(ModuleEvent::Action::kAdd, "mod_b"));
    CHECK(io.run_one() == 1);
    CHECK(kicks == 1);
    CHECK(Messages(*sub, clock) ==
          std::vector<std::string>{"KernelChanged: remove mod_a", "KernelChanged: add mod_b"});

    // Lost events: only a whole new look tells what they said.
    pipe.Push(absl::UnavailableError("uevent receive buffer overflowed"));
    CHECK(io.run_one() == 1);
    CHECK(kicks == 2);
    CHECK(Messages(*sub, clock).empty());

    // Still armed after each burst.
    pipe.Push(Event(ModuleEvent::Action::kRemove, "mod_b"));
    CHECK(io.run_one() == 1);
    CHECK(kicks == 3);
  }
  std::fclose(devnull);
}

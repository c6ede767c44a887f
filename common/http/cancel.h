#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace kmodd {
class Clock;
}  // namespace kmodd

namespace kmodd::http {

// Stops calls in flight from another thread: a watch stream that may stay silent for
// minutes, or a retry loop's wait. Cancel() is sticky: calls started after it fail at once
// with Cancelled. One Cancellation may be shared by many concurrent calls.
class Cancellation {
 public:
  Cancellation() = default;
  Cancellation(const Cancellation&) = delete;
  Cancellation& operator=(const Cancellation&) = delete;

  void Cancel();
  bool cancelled() const;

  // Waits for `d` or until Cancel(), whichever comes first; true when cancelled.
  bool WaitFor(std::chrono::milliseconds d);
  // The same, `d` of `clock`'s time (common/clock.h): FakeClock in tests.
  bool WaitFor(std::chrono::milliseconds d, const Clock& clock);

  // For the client: a call running on `ioc` is stopped by Cancel() while attached.
  void Attach(boost::asio::io_context* ioc);
  void Detach(boost::asio::io_context* ioc);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool cancelled_ = false;
  std::vector<boost::asio::io_context*> running_;
};

}  // namespace kmodd::http

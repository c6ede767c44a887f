#include "common/http/cancel.h"

#include <algorithm>
#include <boost/asio/io_context.hpp>

#include "common/clock.h"

namespace kmodd::http {

void Cancellation::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  // io_context::stop() is thread-safe; the call notices after its run() returns.
  for (boost::asio::io_context* ioc : running_) {
    ioc->stop();
  }
  cv_.notify_all();
}

bool Cancellation::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

bool Cancellation::WaitFor(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, d, [this] { return cancelled_; });
}

bool Cancellation::WaitFor(std::chrono::milliseconds d, const Clock& clock) {
  std::unique_lock<std::mutex> lock(mu_);
  return clock.WaitFor(lock, cv_, d, [this] { return cancelled_; });
}

void Cancellation::Attach(boost::asio::io_context* ioc) {
  std::lock_guard<std::mutex> lock(mu_);
  running_.push_back(ioc);
}

void Cancellation::Detach(boost::asio::io_context* ioc) {
  std::lock_guard<std::mutex> lock(mu_);
  running_.erase(std::remove(running_.begin(), running_.end(), ioc), running_.end());
}

}  // namespace kmodd::http

#include "tests/fakes/fake_clock.h"

#include <vector>

namespace kmodd {

bool FakeClock::WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                          Monotonic deadline, const std::function<bool()>& done) const {
  // Registered and unregistered without the caller's mutex, so that the lock order is
  // always mu_ before a waiter's mutex (Advance). A notify in between is not lost: done()
  // is looked at again under the caller's mutex before waiting.
  lock.unlock();
  std::list<Waiter>::iterator self;
  {
    std::lock_guard guard(mu_);
    self = waiters_.insert(waiters_.end(), Waiter{lock.mutex(), &cv});
  }
  waiters_changed_.notify_all();
  lock.lock();
  bool result = false;
  for (;;) {
    if (done()) {
      result = true;
      break;
    }
    if (MonotonicNow() >= deadline) {
      break;
    }
    cv.wait(lock);
  }
  lock.unlock();
  {
    std::lock_guard guard(mu_);
    waiters_.erase(self);
  }
  waiters_changed_.notify_all();
  lock.lock();
  return result;
}

void FakeClock::Advance(absl::Duration d) {
  elapsed_ns_ += absl::ToInt64Nanoseconds(d);
  // Under mu_ a waiter cannot unregister, so its mutex and condition variable outlive this.
  std::lock_guard guard(mu_);
  for (const Waiter& w : waiters_) {
    std::lock_guard waiter_lock(*w.mu);  // a waiter between its time check and its wait
    w.cv->notify_all();
  }
}

bool FakeClock::AwaitWaiters(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return waiters_changed_.wait_for(lock, timeout, [&] { return waiters_.size() >= n; });
}

size_t FakeClock::waiters() const {
  std::lock_guard guard(mu_);
  return waiters_.size();
}

}  // namespace kmodd

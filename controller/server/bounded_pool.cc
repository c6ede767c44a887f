#include "controller/server/bounded_pool.h"

#include <algorithm>

namespace kmodd::server {

BoundedPool::BoundedPool(int workers, int queue) : max_queue_(std::max(0, queue)) {
  for (int i = 0; i < std::max(1, workers); ++i) {
    threads_.emplace_back([this] { Run(); });
  }
}

BoundedPool::~BoundedPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) {
    t.join();
  }
}

bool BoundedPool::TrySubmit(std::function<void()> work) {
  {
    std::lock_guard lock(mu_);
    // Idle workers take queued work at once: room is theirs plus the queue's.
    if (stop_ || queue_.size() >= max_queue_ + (threads_.size() - busy_)) {
      return false;
    }
    queue_.push_back(std::move(work));
  }
  cv_.notify_one();
  return true;
}

int BoundedPool::queued() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(queue_.size());
}

void BoundedPool::Run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) {
      return;  // stopping, and nothing left: a queued stream is always answered
    }
    std::function<void()> work = std::move(queue_.front());
    queue_.pop_front();
    ++busy_;
    lock.unlock();
    try {
      work();
    } catch (...) {  // NOLINT(bugprone-empty-catch): the work reports its own failures
      // Nothing may end a worker thread (or, leaving it, the controller).
    }
    lock.lock();
    --busy_;
  }
}

}  // namespace kmodd::server

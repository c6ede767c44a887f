#include "controller/kube_mode/work_queue.h"

#include <algorithm>

namespace kmodd::server {

WorkQueue::WorkQueue(const Clock& clock, WorkQueueOptions options)
    : clock_(clock), options_(options), random_(options.seed) {}

void WorkQueue::AddLocked(const std::string& key) {
  if (auto w = waiting_.find(key); w != waiting_.end()) {
    due_.erase({w->second, key});
    waiting_.erase(w);
  }
  if (!dirty_.insert(key).second) {
    return;  // queued already, or queued again when its worker is done
  }
  if (processing_.count(key) != 0) {
    return;
  }
  queue_.push_back(key);
  cv_.notify_one();
}

void WorkQueue::Add(const std::string& key) {
  std::lock_guard lock(mu_);
  if (!shutting_down_) {
    AddLocked(key);
  }
}

void WorkQueue::AddAfter(const std::string& key, std::chrono::nanoseconds delay) {
  if (delay <= std::chrono::nanoseconds::zero()) {
    Add(key);
    return;
  }
  std::lock_guard lock(mu_);
  if (shutting_down_ || dirty_.count(key) != 0) {
    return;  // due already
  }
  const Clock::Monotonic at = clock_.MonotonicNow() + delay;
  auto [w, inserted] = waiting_.try_emplace(key, at);
  if (!inserted) {
    if (w->second <= at) {
      return;
    }
    due_.erase({w->second, key});
    w->second = at;
  }
  due_.insert({at, key});
  ++generation_;
  cv_.notify_all();  // a waiter may have to wake earlier
}

std::chrono::nanoseconds WorkQueue::NextBackoff(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = failures_.find(key);
  const int n = it == failures_.end() ? 0 : it->second;
  std::chrono::nanoseconds d = options_.base_delay;
  for (int i = 0; i < n && d < options_.max_delay; ++i) {
    d *= 2;
  }
  return std::min<std::chrono::nanoseconds>(d, options_.max_delay);
}

void WorkQueue::AddRateLimited(const std::string& key) {
  std::chrono::nanoseconds d = NextBackoff(key);
  {
    std::lock_guard lock(mu_);
    ++failures_[key];
    if (options_.jitter > 0) {
      std::uniform_real_distribution<double> u(0.0, options_.jitter);
      const double extra = static_cast<double>(d.count()) * u(random_);
      d += std::chrono::nanoseconds(static_cast<int64_t>(extra));
    }
  }
  AddAfter(key, d);
}

void WorkQueue::Forget(const std::string& key) {
  std::lock_guard lock(mu_);
  failures_.erase(key);
}

std::optional<Clock::Monotonic> WorkQueue::PromoteLocked() {
  const Clock::Monotonic now = clock_.MonotonicNow();
  while (!due_.empty() && due_.begin()->first <= now) {
    const std::string key = due_.begin()->second;
    AddLocked(key);  // takes it out of waiting_ and due_
  }
  if (due_.empty()) {
    return std::nullopt;
  }
  return due_.begin()->first;
}

std::optional<std::string> WorkQueue::PopLocked() {
  if (queue_.empty()) {
    return std::nullopt;
  }
  std::string key = std::move(queue_.front());
  queue_.pop_front();
  dirty_.erase(key);
  processing_.insert(key);
  return key;
}

std::optional<std::string> WorkQueue::Get() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (shutting_down_) {
      return std::nullopt;
    }
    const std::optional<Clock::Monotonic> next = PromoteLocked();
    if (std::optional<std::string> key = PopLocked()) {
      return key;
    }
    // Without a delayed key, wake at least hourly: a deadline is needed, none is due.
    const Clock::Monotonic deadline = next ? *next : clock_.MonotonicNow() + std::chrono::hours(1);
    const uint64_t generation = generation_;
    clock_.WaitUntil(lock, cv_, deadline, [&] {
      return shutting_down_ || !queue_.empty() || generation_ != generation;
    });
  }
}

std::optional<std::string> WorkQueue::TryGet() {
  std::lock_guard lock(mu_);
  if (shutting_down_) {
    return std::nullopt;
  }
  (void)PromoteLocked();
  return PopLocked();
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard lock(mu_);
  processing_.erase(key);
  if (dirty_.count(key) != 0 && !shutting_down_) {
    queue_.push_back(key);
    cv_.notify_one();
  }
}

void WorkQueue::ShutDown() {
  std::lock_guard lock(mu_);
  shutting_down_ = true;
  queue_.clear();
  dirty_.clear();
  waiting_.clear();
  due_.clear();
  cv_.notify_all();
}

size_t WorkQueue::Len() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

size_t WorkQueue::Waiting() const {
  std::lock_guard lock(mu_);
  return waiting_.size();
}

}  // namespace kmodd::server

#include "controller/kube_mode/event_queue.h"

#include <cstdint>
#include <exception>
#include <utility>

namespace kmodd::server {

void EventQueue::Start() {
  std::lock_guard lock(mu_);
  if (running_ || stopping_) {
    return;
  }
  running_ = true;
  thread_ = std::thread([this] { Run(); });
}

void EventQueue::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

bool EventQueue::Post(std::function<void()> job) {
  {
    std::unique_lock lock(mu_);
    if (running_ && !stopping_) {
      if (jobs_.size() >= max_) {
        if (dropped_++ % 1000 == 0) {
          log_.Warn("events dropped: the event queue is full",
                    {{"dropped", static_cast<int64_t>(dropped_)}});
        }
        return false;
      }
      jobs_.push_back(std::move(job));
      lock.unlock();
      cv_.notify_one();
      return true;
    }
  }
  RunJob(job);
  return true;
}

void EventQueue::RunJob(const std::function<void()>& job) {
  try {
    job();
  } catch (const std::exception& e) {
    log_.Error("an event job failed", {{"error", e.what()}});
  } catch (...) {
    log_.Error("an event job failed", {{"error", "an exception that is not a std::exception"}});
  }
}

size_t EventQueue::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

void EventQueue::Run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) {
      running_ = false;
      return;  // stopping, and everything queued has run
    }
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    RunJob(job);
    job = nullptr;
    lock.lock();
  }
}

}  // namespace kmodd::server

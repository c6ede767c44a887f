#include "common/http/worker_pool.h"

#include <algorithm>
#include <optional>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace kmodd::http {

absl::Status WorkerPool::Start(int workers) {
  workers = std::max(workers, 1);
  max_large_ = std::max(workers - 1, 1);
  try {
    for (int i = 0; i < workers; ++i) {
      threads_.emplace_back([this, i] { Work(/*may_large=*/i < max_large_); });
    }
  } catch (const std::system_error& e) {
    Stop();
    return absl::UnavailableError(
        absl::StrCat("cannot start the HTTP server's worker threads: ", e.what()));
  }
  return absl::OkStatus();
}

void WorkerPool::Submit(const std::string& peer, bool large, Job job) {
  {
    std::lock_guard lock(mu_);
    if (stop_) {
      return;  // `job` goes unrun, unlocked
    }
    (large ? large_ : small_).Push(peer, std::move(job));
  }
  cv_.notify_all();  // one woken thread may not take this size; there are a few
}

void WorkerPool::Work(bool may_large) {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this, may_large] {
      return stop_ || !small_.empty() || (may_large && !large_.empty());
    });
    if (stop_) {
      return;
    }
    bool large = may_large && !large_.empty();
    if (large && !small_.empty()) {
      large = large_turn_;
      large_turn_ = !large_turn_;
    }
    std::optional<Job> job = (large ? large_ : small_).Pop();
    ++running_;
    running_large_ += large ? 1 : 0;
    lock.unlock();
    try {
      (*job)();
    } catch (...) {  // NOLINT(bugprone-empty-catch): the job's owner answers; the thread lives
    }
    job.reset();  // its captures go here, outside the lock
    lock.lock();
    --running_;
    running_large_ -= large ? 1 : 0;
  }
}

void WorkerPool::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) {
      t.join();
    }
  }
  threads_.clear();
  FairQueue<Job> small;
  FairQueue<Job> large;
  {
    std::lock_guard lock(mu_);
    std::swap(small, small_);
    std::swap(large, large_);
  }
  // Destroyed here, unlocked: a job's captures may own what its destructor releases.
}

WorkerPool::Counts WorkerPool::counts() const {
  std::lock_guard lock(mu_);
  return {small_.size() + large_.size(), running_, running_large_};
}

}  // namespace kmodd::http

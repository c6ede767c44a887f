#include "common/http/server_limits.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace kmodd::http {

ConnectionLimiter::Slot& ConnectionLimiter::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = std::exchange(other.owner_, nullptr);
    peer_ = std::move(other.peer_);
  }
  return *this;
}

void ConnectionLimiter::Slot::Release() {
  if (owner_ != nullptr) {
    std::exchange(owner_, nullptr)->Release(peer_);
  }
}

std::optional<ConnectionLimiter::Slot> ConnectionLimiter::TryAcquire(const std::string& peer) {
  std::lock_guard lock(mu_);
  auto it = by_peer_.find(peer);
  const int of_peer = it != by_peer_.end() ? it->second : 0;
  if (total_ >= max_total_ || of_peer >= max_per_peer_) {
    return std::nullopt;
  }
  ++total_;
  ++by_peer_[peer];
  return Slot(this, peer);
}

void ConnectionLimiter::Release(const std::string& peer) {
  std::lock_guard lock(mu_);
  --total_;
  auto it = by_peer_.find(peer);
  if (it != by_peer_.end() && --it->second == 0) {
    by_peer_.erase(it);
  }
  if (total_ == 0) {
    none_.notify_all();
  }
}

bool ConnectionLimiter::WaitNone(std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  return none_.wait_for(lock, wait, [this] { return total_ == 0; });
}

int ConnectionLimiter::connections() const {
  std::lock_guard lock(mu_);
  return total_;
}

BodyBudget::Lease& BodyBudget::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = std::exchange(other.owner_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void BodyBudget::Lease::Release() {
  if (owner_ != nullptr) {
    std::exchange(owner_, nullptr)->Release(std::exchange(bytes_, 0));
  }
}

void BodyBudget::Acquire(const std::string& peer, size_t bytes, Granted granted) {
  bytes = std::min(bytes, total_);
  {
    std::lock_guard lock(mu_);
    if (closed_) {
      return;
    }
    if (!waiting_.empty() || free_ < bytes) {
      waiting_.Push(peer, Waiter{bytes, std::move(granted)});
      return;
    }
    free_ -= bytes;
  }
  granted(Lease(this, bytes));
}

void BodyBudget::Release(size_t bytes) {
  std::vector<Waiter> ready;
  {
    std::lock_guard lock(mu_);
    free_ += bytes;
    if (closed_) {
      return;
    }
    // The peer whose turn it is goes first even when a later one would fit: a request of
    // the whole budget is not passed over forever by smaller ones.
    for (Waiter* w = waiting_.Front(); w != nullptr && w->bytes <= free_; w = waiting_.Front()) {
      free_ -= w->bytes;
      ready.push_back(std::move(*waiting_.Pop()));
    }
  }
  for (Waiter& w : ready) {
    w.granted(Lease(this, w.bytes));
  }
}

void BodyBudget::Close() {
  FairQueue<Waiter> dropped;  // destroyed after the lock: a callback may own a session
  std::lock_guard lock(mu_);
  closed_ = true;
  std::swap(dropped, waiting_);
}

size_t BodyBudget::available() const {
  std::lock_guard lock(mu_);
  return free_;
}

size_t BodyBudget::waiting() const {
  std::lock_guard lock(mu_);
  return waiting_.size();
}

}  // namespace kmodd::http

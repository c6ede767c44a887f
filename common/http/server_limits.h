#pragma once

// What one client of common/http's server can hold: connections (a cap in all and per client
// address) and the memory of large request bodies (a byte budget that waiting clients share
// in turn).
// Thread-safe; a slot or lease gives back what it holds when destroyed.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/http/fair_queue.h"

namespace kmodd::http {

class ConnectionLimiter {
 public:
  ConnectionLimiter(int max_total, int max_per_peer)
      : max_total_(max_total), max_per_peer_(max_per_peer) {}

  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept { *this = std::move(other); }
    Slot& operator=(Slot&& other) noexcept;
    ~Slot() { Release(); }
    void Release();

   private:
    friend class ConnectionLimiter;
    Slot(ConnectionLimiter* owner, std::string peer) : owner_(owner), peer_(std::move(peer)) {}
    ConnectionLimiter* owner_ = nullptr;
    std::string peer_;
  };

  // A slot for one more connection from `peer`, or nullopt when that would pass either cap.
  std::optional<Slot> TryAcquire(const std::string& peer);
  int connections() const;
  // Until no slot is held, or `wait` has passed: false then.
  [[nodiscard]] bool WaitNone(std::chrono::milliseconds wait);

 private:
  void Release(const std::string& peer);

  const int max_total_;
  const int max_per_peer_;
  mutable std::mutex mu_;
  std::condition_variable none_;
  int total_ = 0;                                 // guarded by mu_
  std::unordered_map<std::string, int> by_peer_;  // guarded by mu_; no zero entries
};

class BodyBudget {
 public:
  explicit BodyBudget(size_t bytes) : total_(bytes), free_(bytes) {}

  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept { *this = std::move(other); }
    Lease& operator=(Lease&& other) noexcept;
    ~Lease() { Release(); }
    void Release();

   private:
    friend class BodyBudget;
    Lease(BodyBudget* owner, size_t bytes) : owner_(owner), bytes_(bytes) {}
    BodyBudget* owner_ = nullptr;
    size_t bytes_ = 0;
  };

  using Granted = std::function<void(Lease)>;

  // Calls `granted` with a lease of `bytes` (at most the whole budget), at once when that
  // much is free and no one waits, else from the thread whose release frees it. Waiting
  // peers take turns; a peer's own requests wait in order.
  void Acquire(const std::string& peer, size_t bytes, Granted granted);

  // At shutdown: drops the waiting requests unserved (their callbacks may own sessions),
  // and from now on grants nothing.
  void Close();

  size_t available() const;
  size_t waiting() const;

 private:
  struct Waiter {
    size_t bytes = 0;
    Granted granted;
  };
  void Release(size_t bytes);

  const size_t total_;
  mutable std::mutex mu_;
  size_t free_;                 // guarded by mu_
  FairQueue<Waiter> waiting_;  // guarded by mu_
  bool closed_ = false;        // guarded by mu_
};

}  // namespace kmodd::http

#pragma once

// Work that must not hold up the writer's workers: the Node Events that follow a label
// write. A label is what users and DaemonSets wait on; an Event is for people reading
// `kubectl describe`. Made inline, each Event was a second API round trip per node before
// the worker could take the next node: a thousand labels waited for a thousand Events.
// One thread runs the jobs in order; at most `max` wait (more are dropped and counted, as
// client-go's broadcaster drops Events when its queue is full).

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "common/log.h"

namespace kmodd::server {

class EventQueue {
 public:
  explicit EventQueue(Logger& log, size_t max = 10000) : log_(log), max_(max) {}
  ~EventQueue() { Stop(); }
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  void Start();
  // Runs what is queued, then joins. Idempotent.
  void Stop();
  // Queues `job` (it must not throw; one that does is dropped and logged). Before Start or
  // after Stop it runs inline. False when the queue is full and `job` was dropped.
  bool Post(std::function<void()> job);
  size_t dropped() const;

 private:
  void Run();
  // Runs `job`; what it throws is logged, never let out.
  void RunJob(const std::function<void()>& job);

  Logger& log_;
  const size_t max_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_
  bool running_ = false;                    // guarded by mu_
  bool stopping_ = false;                   // guarded by mu_
  size_t dropped_ = 0;                      // guarded by mu_
  std::thread thread_;
};

}  // namespace kmodd::server

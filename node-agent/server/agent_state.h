#pragma once

// The agent's observable state, shared by the reconciler (writer), the Sync client and the
// local service (readers): per-Module status, the desired version in force, the controller
// connection, and a ring of recent events with live subscribers. Thread-safe. Its
// timestamps and its waits are the agent's clock's (common/clock.h).

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "node-agent/server/module_status.h"

namespace kmodd::agent {

struct AgentEvent {
  int64_t unix_ms = 0;
  std::string kind;    // PhaseChanged, PullProgress, DesiredReceived, KernelChanged, ...
  std::string module;  // namespace/name, "" for node-level events
  std::string message;
  std::optional<api::Phase> phase;
  int64_t bytes_done = 0;
  int64_t bytes_total = 0;
};

struct ControllerState {
  bool connected = false;
  std::string address;
  int64_t since_unix_ms = 0;
};

struct AgentSnapshot {
  uint64_t generation = 0;  // changes whenever anything a report carries changes
  std::vector<ModuleStatus> modules;  // sorted by key
  std::string desired_version;
  std::string desired_source;  // controller, journal, override; "" = none yet
  ControllerState controller;
  std::vector<std::string> overrides;
};

// Events for one subscriber, in order. A subscriber that falls far behind loses the oldest.
class EventSubscription {
 public:
  explicit EventSubscription(const Clock& clock) : clock_(clock) {}

  // The events queued, waiting until `deadline` (on the agent's clock) for one when there
  // are none.
  std::vector<AgentEvent> Next(Clock::Monotonic deadline);

 private:
  friend class AgentState;
  void Push(const AgentEvent& e);

  const Clock& clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<AgentEvent> queue_;
};

class AgentState {
 public:
  explicit AgentState(const Clock& clock, size_t ring_size = 256);

  // Replaces every Module's status. Keeps since_unix_ms while a phase stays, emits a
  // PhaseChanged event for each change, and bumps the generation iff anything changed.
  void SetModules(std::vector<ModuleStatus> modules);
  void SetDesired(const std::string& version, const std::string& source,
                  std::vector<std::string> overrides);
  void SetController(bool connected, const std::string& address);
  void AddEvent(AgentEvent e);

  AgentSnapshot Snapshot() const;
  // Waits until the generation is not `seen` or `deadline` (on the agent's clock) passes;
  // returns the generation.
  uint64_t WaitForChange(uint64_t seen, Clock::Monotonic deadline);

  // With `replay`, the ring's events come first.
  std::shared_ptr<EventSubscription> Subscribe(bool replay);

 private:
  void AddEventLocked(AgentEvent e);
  void BumpLocked();
  int64_t NowUnixMs() const { return absl::ToUnixMillis(clock_.Now()); }

  const Clock& clock_;
  const size_t ring_size_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  AgentSnapshot snap_;
  std::deque<AgentEvent> ring_;
  std::vector<std::weak_ptr<EventSubscription>> subscribers_;
};

}  // namespace kmodd::agent

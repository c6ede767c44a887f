#include "node-agent/server/agent_state.h"

#include <algorithm>
#include <map>

namespace kmodd::agent {

namespace {

constexpr size_t kMaxQueued = 4096;

}  // namespace

void EventSubscription::Push(const AgentEvent& e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(e);
    if (queue_.size() > kMaxQueued) {
      queue_.pop_front();
    }
  }
  cv_.notify_one();
}

std::vector<AgentEvent> EventSubscription::Next(Clock::Monotonic deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  clock_.WaitUntil(lock, cv_, deadline, [this] { return !queue_.empty(); });
  std::vector<AgentEvent> out(queue_.begin(), queue_.end());
  queue_.clear();
  return out;
}

AgentState::AgentState(const Clock& clock, size_t ring_size)
    : clock_(clock), ring_size_(std::max<size_t>(1, ring_size)) {}

void AgentState::BumpLocked() {
  ++snap_.generation;
  changed_.notify_all();
}

void AgentState::SetModules(std::vector<ModuleStatus> modules) {
  std::sort(modules.begin(), modules.end(),
            [](const ModuleStatus& a, const ModuleStatus& b) { return a.key < b.key; });
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, const ModuleStatus*> before;
  for (const auto& m : snap_.modules) {
    before[m.key] = &m;
  }
  const int64_t now = NowUnixMs();
  bool changed = modules.size() != snap_.modules.size();
  std::vector<AgentEvent> events;
  for (auto& m : modules) {
    auto it = before.find(m.key);
    if (it != before.end() && it->second->SameAs(m)) {
      m.since_unix_ms = it->second->since_unix_ms;
      m.updated_unix_ms = it->second->updated_unix_ms;
      continue;
    }
    changed = true;
    m.updated_unix_ms = now;
    if (it != before.end() && it->second->phase == m.phase) {
      m.since_unix_ms = it->second->since_unix_ms;
    } else {
      m.since_unix_ms = now;
      events.push_back(AgentEvent{now, "PhaseChanged", m.key, m.message, m.phase, 0, 0});
    }
  }
  for (const auto& entry : before) {
    const std::string& key = entry.first;
    const bool gone = std::none_of(modules.begin(), modules.end(),
                                   [&key](const ModuleStatus& m) { return m.key == key; });
    if (gone) {
      events.push_back(AgentEvent{now, "Removed", key, "no longer desired, nothing loaded", {}, 0, 0});
    }
  }
  if (!changed) {
    return;
  }
  snap_.modules = std::move(modules);
  for (auto& e : events) {
    AddEventLocked(std::move(e));
  }
  BumpLocked();
}

void AgentState::SetDesired(const std::string& version, const std::string& source,
                            std::vector<std::string> overrides) {
  std::lock_guard<std::mutex> lock(mu_);
  if (snap_.desired_version == version && snap_.desired_source == source &&
      snap_.overrides == overrides) {
    return;
  }
  snap_.desired_version = version;
  snap_.desired_source = source;
  snap_.overrides = std::move(overrides);
  BumpLocked();
}

void AgentState::SetController(bool connected, const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  if (snap_.controller.connected == connected && snap_.controller.address == address &&
      snap_.controller.since_unix_ms != 0) {
    return;
  }
  const int64_t now = NowUnixMs();
  snap_.controller = ControllerState{connected, address, now};
  AddEventLocked(AgentEvent{now, connected ? "ControllerConnected" : "ControllerDisconnected", "",
                            address, {}, 0, 0});
}

void AgentState::AddEvent(AgentEvent e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (e.unix_ms == 0) {
    e.unix_ms = NowUnixMs();
  }
  AddEventLocked(std::move(e));
}

void AgentState::AddEventLocked(AgentEvent e) {
  subscribers_.erase(std::remove_if(subscribers_.begin(), subscribers_.end(),
                                    [](const auto& w) { return w.expired(); }),
                     subscribers_.end());
  for (const auto& w : subscribers_) {
    if (auto s = w.lock()) {
      s->Push(e);
    }
  }
  // Progress ticks are for live watchers; the ring keeps what happened.
  if (e.kind != "PullProgress") {
    ring_.push_back(std::move(e));
    if (ring_.size() > ring_size_) {
      ring_.pop_front();
    }
  }
}

AgentSnapshot AgentState::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snap_;
}

uint64_t AgentState::WaitForChange(uint64_t seen, Clock::Monotonic deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  clock_.WaitUntil(lock, changed_, deadline, [&] { return snap_.generation != seen; });
  return snap_.generation;
}

std::shared_ptr<EventSubscription> AgentState::Subscribe(bool replay) {
  auto sub = std::make_shared<EventSubscription>(clock_);
  std::lock_guard<std::mutex> lock(mu_);
  if (replay) {
    for (const auto& e : ring_) {
      sub->Push(e);
    }
  }
  subscribers_.push_back(sub);
  return sub;
}

}  // namespace kmodd::agent

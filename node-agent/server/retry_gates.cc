#include "node-agent/server/retry_gates.h"

#include "node-agent/server/module_status.h"

namespace kmodd::agent {

bool RetryGates::Open(const std::string& key, Time now) const {
  auto g = gates_.find(key);
  return g == gates_.end() || (!g->second.terminal && g->second.next <= now);
}

std::optional<RetryGates::Time> RetryGates::NextOpening(Time after) const {
  std::optional<Time> wake;
  for (const auto& [key, g] : gates_) {
    if (!g.terminal && g.next > after && (!wake || g.next < *wake)) {
      wake = g.next;
    }
  }
  return wake;
}

void RetryGates::Record(const std::string& key, const absl::Status& s, Time now, double unit,
                        const std::optional<api::NodeModuleSpec>& spec, bool in_tree) {
  if (s.ok()) {
    Clear(key);
    return;
  }
  if (!in_tree) {
    errors_[key] = s;
  }
  Gate& g = gates_[key];
  g.in_tree = in_tree;
  if (spec) {
    g.spec = spec;
  }
  g.terminal = ClassOf(s) == ErrorClass::kTerminal;
  g.next = now + BackoffDelay(policy_, g.attempt++, unit);
}

void RetryGates::Hold(const std::string& key, Time until) { gates_[key].next = until; }

void RetryGates::Clear(const std::string& key) {
  gates_.erase(key);
  errors_.erase(key);
}

void RetryGates::ClearInTree() {
  for (auto g = gates_.begin(); g != gates_.end();) {
    g = g->second.in_tree ? gates_.erase(g) : std::next(g);
  }
}

void RetryGates::ForgetChanged(const api::NodeModuleSpec& spec) {
  const std::string key = spec.Key();
  auto g = gates_.find(key);
  if (g != gates_.end() && !(g->second.spec && *g->second.spec == spec)) {
    gates_.erase(g);
    errors_.erase(key);
  }
}

absl::Status RetryGates::LastError(const std::string& key) const {
  auto e = errors_.find(key);
  return e == errors_.end() ? absl::OkStatus() : e->second;
}

bool RetryGates::RetryScheduled(const std::string& key) const {
  auto g = gates_.find(key);
  return g != gates_.end() && !g->second.terminal;
}

}  // namespace kmodd::agent

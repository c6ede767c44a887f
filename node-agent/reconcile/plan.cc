#include "node-agent/reconcile/plan.h"

#include <algorithm>
#include <map>

namespace kmodd::reconcile {

namespace {

bool Live(const kernel::KernelState& k, const std::string& name) {
  const kernel::LoadedModule* m = k.Find(name);
  return m != nullptr && m->state == kernel::LoadedModule::State::kLive;
}

}  // namespace

bool Converged(const DesiredModule& d, const kernel::KernelState& observed, const Journal& j) {
  auto it = j.modules.find(d.key);
  if (it == j.modules.end() || it->second.fingerprint != d.fingerprint ||
      it->second.phase != Phase::kLoaded || j.boot_id != observed.boot_id) {
    return false;
  }
  for (const auto& step : d.steps) {
    if (!Live(observed, step.name)) {
      return false;
    }
  }
  for (const auto& name : d.in_tree_remove) {
    const kernel::LoadedModule* m = observed.Find(name);
    if (m != nullptr && !m->OutOfTree()) {
      return false;  // the in-tree module is back
    }
  }
  return true;
}

std::vector<Action> PlanActions(const std::vector<DesiredModule>& desired,
                                const kernel::KernelState& observed, const Journal& journal) {
  std::map<std::string, const DesiredModule*> by_key;
  for (const auto& d : desired) {
    by_key[d.key] = &d;
  }
  std::vector<Action> unloads;
  std::vector<Action> loads;
  for (const auto& [key, entry] : journal.modules) {
    auto it = by_key.find(key);
    if (it == by_key.end()) {
      unloads.push_back({Action::Kind::kUnload, key, "no longer desired"});
    } else if (it->second->problem.ok() && entry.fingerprint != it->second->fingerprint &&
               !entry.loaded.empty()) {
      unloads.push_back({Action::Kind::kUnload, key, "configuration changed"});
    }
  }
  for (const auto& [key, d] : by_key) {
    if (!d->problem.ok() || Converged(*d, observed, journal)) {
      continue;
    }
    auto it = journal.modules.find(key);
    std::string why = "not loaded";
    if (it != journal.modules.end()) {
      if (it->second.fingerprint != d->fingerprint) {
        why = "configuration changed";
      } else if (it->second.phase == Phase::kLoaded) {
        why = "drift: a module is missing or an in-tree module is back";
      } else {
        why = std::string("resuming from ") + PhaseName(it->second.phase);
      }
    }
    loads.push_back({Action::Kind::kLoad, key, why});
  }
  unloads.insert(unloads.end(), loads.begin(), loads.end());
  return unloads;
}

}  // namespace kmodd::reconcile

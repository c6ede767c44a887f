#include "node-agent/reconcile/action_planner.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"

namespace kmodd::reconcile {

namespace {

bool Live(const kernel::KernelState& k, const std::string& name) {
  const kernel::LoadedModule* m = k.Find(name);
  return m != nullptr && m->state == kernel::LoadedModule::State::kLive;
}

// The in-tree modules kmodd owes back, last removed first, with why. A record whose module
// or target a desired Module removes stays: reloading a holder would load its target too.
std::vector<Action> PlanReloads(const std::vector<DesiredModule>& desired,
                                const kernel::KernelState& observed, const Journal& journal) {
  std::vector<Action> out;
  if (journal.boot_id != observed.boot_id) {
    return out;  // another boot's records: that kernel's state is gone
  }
  std::set<std::string> kept;
  for (const auto& d : desired) {
    for (const auto& name : d.in_tree_remove) {
      kept.insert(kernel::CanonicalModuleName(name));
    }
  }
  for (auto r = journal.in_tree_removed.rbegin(); r != journal.in_tree_removed.rend(); ++r) {
    if (kept.count(r->module) != 0 || kept.count(r->target) != 0) {
      continue;
    }
    const kernel::LoadedModule* m = observed.Find(r->module);
    std::string why = m != nullptr && !m->OutOfTree()
                          ? "loaded again outside kmodd: only the record is dropped"
                          : absl::StrCat("removed for ", r->removed_for,
                                         "; no desired Module removes it any more");
    out.push_back({Action::Kind::kReloadInTree, r->module, std::move(why)});
  }
  return out;
}

}  // namespace

const char* KindName(Action::Kind k) {
  switch (k) {
    case Action::Kind::kUnload:
      return "unload";
    case Action::Kind::kReloadInTree:
      return "reload-in-tree";
    case Action::Kind::kLoad:
      return "load";
  }
  return "unknown";
}

bool Converged(const DesiredModule& d, const kernel::KernelState& observed, const Journal& j) {
  auto it = j.modules.find(d.key);
  if (it == j.modules.end() || it->second.fingerprint != d.fingerprint ||
      it->second.phase != api::Phase::kLoaded || j.boot_id != observed.boot_id) {
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
      } else if (it->second.phase == api::Phase::kLoaded) {
        why = "drift: a module is missing or an in-tree module is back";
      } else {
        why = absl::StrCat("resuming from ", api::PhaseName(it->second.phase));
      }
    }
    loads.push_back({Action::Kind::kLoad, key, why});
  }
  const std::vector<Action> reloads = PlanReloads(desired, observed, journal);
  unloads.insert(unloads.end(), reloads.begin(), reloads.end());
  unloads.insert(unloads.end(), loads.begin(), loads.end());
  return unloads;
}

}  // namespace kmodd::reconcile

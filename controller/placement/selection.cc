#include "controller/placement/selection.h"

#include <algorithm>

namespace kmodd::placement {

std::optional<std::string> FirstSelectorMismatch(const std::map<std::string, std::string>& selector,
                                                 const std::map<std::string, std::string>& labels) {
  for (const auto& [k, v] : selector) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) {
      return k;
    }
  }
  return std::nullopt;
}

bool Tolerates(const api::Toleration& t, const api::Taint& taint) {
  if (!t.effect.empty() && t.effect != taint.effect) {
    return false;
  }
  if (!t.key.empty() && t.key != taint.key) {
    return false;
  }
  if (t.op == "Exists") {
    return true;
  }
  if (t.op.empty() || t.op == "Equal") {
    return t.value == taint.value;
  }
  return false;
}

const api::Taint* FirstUntoleratedNoExecute(const std::vector<api::Taint>& taints,
                                            const std::vector<api::Toleration>& tolerations) {
  for (const auto& taint : taints) {
    if (taint.effect != "NoExecute") {
      continue;
    }
    bool tolerated = false;
    for (const auto& t : tolerations) {
      if (Tolerates(t, taint)) {
        tolerated = true;
        break;
      }
    }
    if (!tolerated) {
      return &taint;
    }
  }
  return nullptr;
}

bool PodSchedulable(const api::Module& m, const std::map<std::string, std::string>& labels,
                    bool unschedulable, const std::vector<api::Taint>& taints) {
  if (unschedulable || FirstSelectorMismatch(m.spec.selector, labels).has_value()) {
    return false;
  }
  return std::all_of(taints.begin(), taints.end(), [&](const api::Taint& taint) {
    if (taint.effect != "NoSchedule" && taint.effect != "NoExecute") {
      return true;
    }
    return std::any_of(m.spec.tolerations.begin(), m.spec.tolerations.end(),
                       [&](const api::Toleration& t) { return Tolerates(t, taint); });
  });
}

}  // namespace kmodd::placement

#include "node-agent/server/shadow_checks.h"

#include <algorithm>

namespace kmodd::agent {

std::vector<std::pair<std::string, std::string>> ShadowChecks::Refresh(
    const reconcile::Journal& journal, Clock::Monotonic now) {
  std::vector<std::pair<std::string, std::string>> fresh;
  for (auto it = checks_.begin(); it != checks_.end();) {
    auto j = journal.modules.find(it->first);
    if (j == journal.modules.end() || j->second.firmware.empty()) {
      warnings_.erase(it->first);
      it = checks_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [key, entry] : journal.modules) {
    if (entry.firmware.empty()) {
      continue;
    }
    auto check = checks_.find(key);
    if (check != checks_.end() && check->second.files == entry.firmware &&
        now - check->second.at < recheck_) {
      continue;
    }
    std::vector<std::string> found;
    for (const firmware::Shadow& s : firmware_.Shadowed(entry.firmware)) {
      found.push_back(firmware::ShadowWarning(s));
    }
    checks_[key] = Check{entry.firmware, now};
    const std::vector<std::string>& before = warnings_[key];
    for (const std::string& w : found) {
      if (std::find(before.begin(), before.end(), w) == before.end()) {
        fresh.emplace_back(key, w);
      }
    }
    warnings_[key] = std::move(found);
  }
  return fresh;
}

}  // namespace kmodd::agent

#pragma once

// Which staged firmware shadows the host's own (firmware/shadow.h), per Module. A Module is
// looked at again when the files staged for it change, and at least every `recheck`
// otherwise: the host's firmware tree changes with its packages, not with kmodd. Not
// thread-safe: the reconciler's worker owns it.

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "node-agent/reconcile/journal.h"
#include "node-agent/reconcile/stores.h"

namespace kmodd::agent {

class ShadowChecks {
 public:
  ShadowChecks(const reconcile::FirmwareStore& firmware, std::chrono::nanoseconds recheck)
      : firmware_(firmware), recheck_(recheck) {}

  // Looks, at `now`, at the Modules of `journal` that are due; forgets the Modules that
  // staged nothing any more. Returns the warnings found for the first time (module,
  // warning), each to be logged once.
  std::vector<std::pair<std::string, std::string>> Refresh(const reconcile::Journal& journal,
                                                           Clock::Monotonic now);

  // The current warnings, by Module key.
  const std::map<std::string, std::vector<std::string>>& warnings() const { return warnings_; }

 private:
  struct Check {
    std::vector<std::string> files;  // what was staged when it was looked at
    Clock::Monotonic at;
  };

  const reconcile::FirmwareStore& firmware_;
  const std::chrono::nanoseconds recheck_;
  std::map<std::string, Check> checks_;
  std::map<std::string, std::vector<std::string>> warnings_;
};

}  // namespace kmodd::agent

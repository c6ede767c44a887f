#pragma once

// When the agent, stopping, removes what it keeps on the node. Uninstall looks exactly like
// this: the Modules are deleted (the controller's last word to the node is "no Modules"),
// the agent unloads what it loaded and loads back the in-tree modules it removed, then the
// DaemonSet goes. So: the state directory and socket are removed at stop when the last
// desired state the controller sent has no Modules and the journal holds nothing (nothing
// of kmodd's loaded, no firmware staged, no in-tree module owed back). Anything unknown
// (no desired state received, an unreadable one, an unreadable journal) keeps everything:
// unknown is not idle. `kmodd-agent cleanup` is the manual way, and reports what is owed.

#include <optional>
#include <string>

#include "common/log.h"
#include "node-agent/server/pass_planner.h"
#include "node-agent/server/state_cleanup.h"

namespace kmodd::agent {

// The desired state persisted at `path` (STATE/desired.pb) by the last run, if any. An
// unreadable or invalid one is none, logged: the agent then waits for the controller and
// unloads nothing.
std::optional<DesiredState> LoadPersistedDesired(const std::string& path, Logger& log);

class UninstallPolicy {
 public:
  UninstallPolicy(std::string state_dir, std::string socket, Logger& log)
      : state_dir_(std::move(state_dir)), socket_(std::move(socket)), log_(log) {}

  struct Decision {
    bool remove = false;
    std::string why;  // for the log and tests
  };
  // Reads the persisted desired state and the journal; changes nothing.
  Decision Decide() const;

  // At stop: removes the agent's state when Decide says so, and logs what was removed and
  // left. Returns what was done; nullopt when the state was kept.
  std::optional<StateCleanup> AtStop() const;

 private:
  const std::string state_dir_;
  const std::string socket_;
  Logger& log_;
};

}  // namespace kmodd::agent

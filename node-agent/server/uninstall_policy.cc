#include "node-agent/server/uninstall_policy.h"

#include <filesystem>

#include "common/file.h"
#include "common/value.h"
#include "kmodd/v1/sync.pb.h"
#include "node-agent/reconcile/journal.h"
#include "node-agent/server/wire.h"

namespace kmodd::agent {

std::optional<DesiredState> LoadPersistedDesired(const std::string& path, Logger& log) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return std::nullopt;
  }
  auto bytes = ReadFile(path);
  v1::NodeDesired d;
  if (!bytes.ok() || !d.ParseFromString(*bytes)) {
    log.Error("persisted desired state unreadable; waiting for the controller, unloading nothing",
              {{"path", path}});
    return std::nullopt;
  }
  auto desired = FromProto(d, "journal");
  if (!desired.ok()) {
    log.Error("persisted desired state invalid; waiting for the controller, unloading nothing",
              {{"path", path}, {"error", std::string(desired.status().message())}});
    return std::nullopt;
  }
  return std::move(*desired);
}

UninstallPolicy::Decision UninstallPolicy::Decide() const {
  std::optional<DesiredState> desired = LoadPersistedDesired(state_dir_ + "/desired.pb", log_);
  if (!desired) {
    return {false, "no desired state received (or unreadable): unknown is not idle"};
  }
  if (!desired->modules.empty()) {
    return {false, "the last desired state has Modules"};
  }
  auto journal = reconcile::LoadJournal(state_dir_ + "/journal.json");
  if (!journal.ok()) {
    return {false, "the journal is unreadable"};
  }
  if (!journal->modules.empty()) {
    return {false, "the journal records Modules (loaded, or firmware staged)"};
  }
  if (!journal->in_tree_removed.empty()) {
    return {false, "an in-tree module is still owed back (kmodd-agent cleanup reports it)"};
  }
  return {true, "nothing desired and nothing loaded"};
}

std::optional<StateCleanup> UninstallPolicy::AtStop() const {
  if (!Decide().remove) {
    return std::nullopt;
  }
  StateCleanup done = RemoveAgentState(state_dir_, socket_);
  Value removed = Value::EmptyList();
  for (const auto& p : done.removed) {
    removed.Append(p);
  }
  Value left = Value::EmptyList();
  for (const auto& p : done.left) {
    left.Append(p);
  }
  log_.Info("nothing desired and nothing loaded: removed the agent's state",
            {{"removed", std::move(removed)}, {"left", std::move(left)}});
  return done;
}

}  // namespace kmodd::agent

#pragma once

// What kmodd leaves on a node, removed: the agent's state directory and its socket. Used by
// `kmodd-agent cleanup` and by the daemon when it stops with nothing desired and nothing
// loaded (the uninstall case). Only what kmodd writes is removed: a state directory that
// holds anything else keeps that (and so stays), so a mistyped --state-dir cannot take a
// directory that is not ours with it.

#include <string>
#include <vector>

namespace kmodd::agent {

struct StateCleanup {
  std::vector<std::string> removed;  // paths removed, in order
  // Paths left, each with why ("not written by kmodd", "a mount point, emptied", an error).
  std::vector<std::string> left;
};

// Removes from `state_dir` the entries the agent writes (journal.json, desired.pb,
// firmware-ledger.json, images/, firmware/, their lock files and the temporary files of
// their atomic writes), then the directory when nothing else is in it; then the socket (and,
// when the agent bound it in PATH.d behind a link at PATH, the link and PATH.d), and its
// directory when that is named kmodd (/run/kmodd) and empty afterwards. A directory that
// is a mount point (a hostPath volume in a pod, a dedicated disk) is emptied and left, its
// lost+found kept. Missing paths are not errors.
StateCleanup RemoveAgentState(const std::string& state_dir, const std::string& socket_path);

}  // namespace kmodd::agent

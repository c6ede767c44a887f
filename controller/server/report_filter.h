#pragma once

// Which modules of a node's report the controller believes, and what changed since the
// last one. PURE: the Hub passes what it knows of the node; no I/O, no lock, no protobuf.
//
// A report changes what the controller writes (Module status rows, node labels) and holds
// a Module's deletion while a connected node lists it (kmodd's finalizer), so a node may
// speak only of what concerns it: a Module this run planned for it or sent it, one its
// last accepted report listed (it is still being unloaded, say), or one an earlier
// controller run may have sent it (a Module that carries kmodd's finalizer this run did
// not put there: after a restart, a Module being deleted is in no plan, and the nodes that
// still run it hold its finalizer until they report it gone). Anything else is ignored.

#include <cstddef>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "controller/server/status.h"

namespace kmodd::server {

struct ReportScope {
  const std::set<std::string>* sent = nullptr;        // keys of every desired state sent
  const std::vector<ReportedModule>* last = nullptr;  // the last accepted report, sorted
  const std::set<std::string>* inherited = nullptr;   // may have come from an earlier run
  // The keys planned for the node now, sorted (not yet sent while the node is held, say).
  // Called at most once, and only for an entry none of the above admits.
  std::function<std::vector<std::string>()> planned;
};

struct FilteredReport {
  std::vector<ReportedModule> accepted;  // sorted by key
  size_t ignored = 0;
  std::vector<std::string> examples;  // the first kExamples keys ignored
  static constexpr size_t kExamples = 3;
};

// `reported` sorted by key, one entry per key (ReportedFromProto). O(n log k).
FilteredReport FilterReport(std::vector<ReportedModule> reported, const ReportScope& scope);

// A module whose phase, version or image differs between two reports: its phase's name, or
// "Gone" for one no longer listed. The views point into the lists.
struct PhaseChange {
  std::string_view key;
  std::string_view phase;
  std::string_view version;  // what the node reports with it
  std::string_view image;
};

// Both lists sorted by key: one merge, O(n + m).
std::vector<PhaseChange> PhaseChanges(const std::vector<ReportedModule>& before,
                                      const std::vector<ReportedModule>& after);

}  // namespace kmodd::server

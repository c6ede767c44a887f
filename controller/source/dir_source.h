#pragma once

// Modules from a directory of manifests (standalone mode): every *.yaml, *.yml and *.json
// file directly inside it, watched with inotify. After a burst of events settles (the
// debounce), the directory is read again as a whole (level-based: which event woke us does
// not matter) and only files whose content changed are decoded. See ModuleFiles for what a
// bad or deleted file does. A file someone is writing in place (modified, not yet closed) is
// left as it was until its writer closes it: its truncated content is not a Module edit.
//
// Two threads: the watcher reads inotify (and what is being written); the reader waits for
// the quiet spell on the injected Clock, so that tests move time instead of sleeping, then
// reads the directory and calls back.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/clock.h"
#include "common/fd.h"
#include "common/log.h"
#include "api/diagnostic.h"
#include "controller/source/module_files.h"

namespace kmodd::source {

struct SourceUpdate {
  // In the order they happened: apply each one's `removed`, then its `set`.
  std::vector<ModuleChanges> changes;
  // Every problem currently known (not only the new ones): the status shows these.
  std::vector<api::Diagnostic> errors;
  // Whether `errors` may hide Modules the source cannot name (a manifest that does not
  // parse): then nothing is sent until the source is once read without errors. A source
  // that names every rejected Module says false and lists in `held` those that may run.
  bool errors_hold_all = true;
  // Modules ("<namespace>/<name>") a node may run whose spec the source does not know (one
  // accepted by an earlier run, rejected now): a node that reports one is sent nothing
  // until it is fixed or deleted, since its desired state would unload it.
  std::set<std::string> held;
  // Modules ("<namespace>/<name>") that carry kmodd's finalizer (Kubernetes mode; none in
  // standalone mode). One this run did not put it on may run on nodes an earlier run sent
  // it to, so those nodes may report it (and hold its deletion) unasked: see Hub::Report.
  std::set<std::string> finalized;
  size_t module_count = 0;
  // Every ModulePolicy in force, by the Module it governs, when they changed (and in the
  // first update); nullopt: as before.
  std::optional<std::map<std::string, api::ModulePolicy>> policies;
};

// The manifests directly in `dir` (*.yaml, *.yml, *.json; not dot files, which editors
// and tools write on their way), as paths, sorted; nullopt with `ec` set when `dir` cannot
// be read.
std::optional<std::vector<std::string>> ListManifests(const std::string& dir, std::error_code& ec);

// Where Modules come from. The callback runs on the source's own thread, one call at a
// time.
class ModuleSource {
 public:
  using Callback = std::function<void(const SourceUpdate&)>;
  virtual ~ModuleSource() = default;
  // Reads everything once (the callback is called before Start returns), then watches.
  [[nodiscard]] virtual absl::Status Start(Callback on_update) = 0;
  virtual void Stop() = 0;
};

class DirSource : public ModuleSource {
 public:
  // `clock` times the debounce; it outlives the source.
  DirSource(std::string dir, const Clock& clock, Logger& log,
            std::chrono::milliseconds debounce = std::chrono::milliseconds(10));
  ~DirSource() override;
  DirSource(const DirSource&) = delete;
  DirSource& operator=(const DirSource&) = delete;

  absl::Status Start(Callback on_update) override;
  void Stop() override;

 private:
  // The watcher thread: waits on inotify, counts events.
  void Watch();
  // The reader thread: after events, waits for a quiet spell, then rescans.
  void Read();
  // Reads the directory and every manifest in it, leaving alone the files in `writing`;
  // calls back if anything changed.
  void Rescan(bool initial, const std::set<std::string>& writing);
  // With mu_ held: waits until no event came for the debounce time, or 20 of them passed
  // (editors and `cp` write in several steps: a quiet spell, but not forever). False when
  // stopping.
  bool SettleLocked(std::unique_lock<std::mutex>& lock);
  // With mu_ held: reads the pending inotify events and tracks which manifests are open
  // for writing.
  void DrainLocked();
  // Logs, once per Module, the fields the standalone controller does not act on.
  void WarnKubernetesOnly(const std::vector<ModuleChanges>& changes);

  const std::string dir_;
  const Clock& clock_;
  Logger& log_;
  const std::chrono::milliseconds debounce_;
  Callback on_update_;
  ModuleFiles files_;                      // reader thread
  std::vector<api::Diagnostic> reported_;  // the errors last logged (reader thread)
  std::map<std::string, api::ModulePolicy> policies_;  // the policies last sent (idem)
  // Module key -> the Kubernetes-only fields last warned about (reader thread): each
  // Module's warning is logged once, and again only when those fields change.
  std::map<std::string, std::string> kube_only_;
  Fd inotify_;
  Fd wake_;  // eventfd: Stop wakes the watcher

  std::mutex mu_;
  std::condition_variable changed_cv_;  // events_ or stopping_ changed
  uint64_t events_ = 0;                 // batches of inotify events read so far
  std::set<std::string> writing_;       // modified and not yet closed
  bool stopping_ = false;
  std::thread watcher_;
  std::thread reader_;
};

}  // namespace kmodd::source

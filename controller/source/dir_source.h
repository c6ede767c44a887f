#pragma once

// Modules from a directory of manifests (standalone mode): every *.yaml, *.yml and *.json
// file directly inside it, watched with inotify. After a burst of events settles (the
// debounce), the directory is read again as a whole (level-based: which event woke us does
// not matter) and only files whose content changed are decoded. See ModuleFiles for what a
// bad or deleted file does. A file someone is writing in place (modified, not yet closed) is
// left as it was until its writer closes it: its truncated content is not a Module edit.

#include <atomic>
#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
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
};

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
  DirSource(std::string dir, Logger& log,
            std::chrono::milliseconds debounce = std::chrono::milliseconds(10));
  ~DirSource() override;
  DirSource(const DirSource&) = delete;
  DirSource& operator=(const DirSource&) = delete;

  absl::Status Start(Callback on_update) override;
  void Stop() override;

 private:
  void Run();
  // Reads the directory and every manifest in it; calls back if anything changed.
  void Rescan(bool initial);
  // Waits until inotify has been quiet for the debounce time; false when stopping.
  bool Settle();
  // Reads the pending inotify events and tracks which manifests are open for writing.
  void Drain();

  const std::string dir_;
  Logger& log_;
  const std::chrono::milliseconds debounce_;
  Callback on_update_;
  ModuleFiles files_;
  std::vector<api::Diagnostic> reported_;  // the errors last logged
  std::set<std::string> writing_;          // modified and not yet closed (watcher thread)
  Fd inotify_;
  Fd wake_;  // eventfd: Stop wakes the watcher
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace kmodd::source

#pragma once

// Kubernetes mode's writer: what the agents report, written back to the API server, while
// `is_leader` says so. controller-runtime's model: keys on one work queue (work_queue.h),
// served by a fixed pool of `workers` threads, each key reconciled by the duty that owns it:
//   "node/<name>"        NodeLabeler (node_labeler.h): the node's KMM labels, and the
//                        ModuleLoaded / ModuleUnloaded Events of the labels it changed
//   "module/<ns>/<name>" FinalizerWriter (finalizer_writer.h), then DevicePluginWriter
//                        (device_plugin_writer.h): its plugin DaemonSets, then DraWriter
//                        (dra_writer.h): its DRA DaemonSets and DeviceClasses, then
//                        ModuleStatusWriter (module_status_writer.h): its status (with
//                        the plugin's and driver's conditions) and Warning Events
// A duty reads the whole current state of its key and returns Ok, RequeueAfter (a refused
// label's retry, a write the watch has not shown yet) or Error, retried with the key's
// exponential backoff (1 s doubling to 2 min, +10% jitter). A key added while queued is
// queued once; a key is never reconciled by two workers at once.
//
// One watcher thread turns hub changes into keys: the nodes the hub says changed (a
// report, a connection, the Node as watched: Hub::WaitForChanges), and the Modules whose
// status, connected reporters or object changed since the last change it took in (one
// status snapshot per wake, at most one per `snapshot_interval`, which the workers read). On becoming leader (or when the
// source first syncs) every key is queued once; so it is every `resync` (5 min), a safety
// net for what no change announces (a Module edited while rejected, a lost write). Not
// leading, nothing is written and what was written is forgotten.

#include <atomic>
#include <cstdint>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "controller/kube/client.h"
#include "controller/kube/events.h"
#include "controller/kube_mode/device_plugin_writer.h"
#include "controller/kube_mode/dra_writer.h"
#include "controller/kube_mode/event_queue.h"
#include "controller/kube_mode/finalizer_writer.h"
#include "controller/kube_mode/kube_source.h"
#include "controller/kube_mode/module_status_writer.h"
#include "controller/kube_mode/node_labeler.h"
#include "controller/kube_mode/work_queue.h"
#include "controller/server/hub.h"
#include "controller/server/status.h"

namespace kmodd::server {

struct KubeWriterOptions {
  // Writes in flight at once: a rollout to a thousand nodes is a thousand label writes.
  size_t workers = 4;
  // Every key again this often, whatever changed.
  std::chrono::nanoseconds resync = std::chrono::minutes(5);
  // While every key is owed but cannot be queued yet (not leading after a lost write, the
  // source not yet synced), leadership and the source are looked at again this often.
  std::chrono::nanoseconds recheck = std::chrono::seconds(1);
  // The hub's status is read (a copy of every node record and Module status, under the
  // hub's lock) at most this often: while a thousand agents report, once per report was
  // quadratic. The nodes a change names are queued at once all the same; their duty reads
  // the hub's record of the node as it is, not the snapshot.
  std::chrono::nanoseconds snapshot_interval = std::chrono::milliseconds(100);
  WorkQueueOptions queue = {};
};

class KubeWriter {
 public:
  KubeWriter(kube::KubeClient& client, Hub& hub, source::KubeSource& source,
             kube::EventRecorder& events, std::function<bool()> is_leader, const Clock& clock,
             Logger& log, KubeWriterOptions options = {});
  ~KubeWriter();
  KubeWriter(const KubeWriter&) = delete;
  KubeWriter& operator=(const KubeWriter&) = delete;

  // The watcher and the workers.
  void Start();
  void Stop();

  // For tests, without Start: takes in the hub as it is now, queues every key, and
  // reconciles every key due on the calling thread. A failed key is due again at its
  // next call.
  void SyncOnce();

  // Duties that failed (each retried with its key's backoff), for the metrics.
  uint64_t ReconcileErrors() const { return errors_.load(std::memory_order_relaxed); }

 private:
  struct Snapshot;

  void Watch();
  void Work();
  // Takes in the hub changes `c`; queues the affected keys (every key when `everything`).
  void TakeIn(const HubChanges& c, bool everything);
  void Process(const std::string& key);
  std::shared_ptr<const Snapshot> snapshot();
  bool stopping();

  Hub& hub_;
  source::KubeSource& source_;
  const std::function<bool()> is_leader_;
  const Clock& clock_;
  Logger& log_;
  const KubeWriterOptions options_;

  NodeLabeler labeler_;  // posts its Node Events on events_
  ModuleStatusWriter status_;
  FinalizerWriter finalizers_;
  DevicePluginWriter device_plugins_;
  DraWriter dra_;
  WorkQueue queue_;

  // The watcher's (and SyncOnce's) own.
  bool leading_ = false;  // took in a change as leader, every key queued since
  std::map<std::string, std::string> fingerprints_;  // Module key -> what its duties read
  std::string targeting_;  // the device plugin Modules' selectors and tolerations
  // A worker found it was not leading: every key is owed once it leads again.
  std::atomic<bool> owed_{false};
  std::atomic<uint64_t> errors_{0};  // duties that failed

  std::mutex mu_;
  std::shared_ptr<const Snapshot> snapshot_;
  bool stopping_ = false;
  std::thread watcher_;
  std::vector<std::thread> workers_;
  // Last: stopped and destroyed first, before the labeler whose jobs it runs.
  EventQueue events_;
};

}  // namespace kmodd::server

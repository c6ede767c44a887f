#pragma once

// Draining a node's device users before a Module's driver on it is replaced or removed
// (ModulePolicy spec.drain, issue 15 item 4), for the hub (server::DrainRequest):
//  1. cordon: spec.unschedulable, with the annotation kmodd.io/cordoned-for naming the
//     Module, unless the node is already cordoned by someone else (then it is left as it
//     is, and never uncordoned by kmodd);
//  2. evict, through the Eviction API (so PodDisruptionBudgets are honoured), the node's
//     running Pods that request one of spec.resources or carry spec.podSelector's labels
//     (a Module's own device plugin and DRA Pods are left to the hub's Draining); a refusal
//     (429: a budget) is tried again every second;
//  3. done once none of them is left on the node (deleted, not just evicting), or timed
//     out after spec.timeoutSeconds, naming the Pods still there.
// Release uncordons a node only when its annotation names that Module.
//
// One thread; a slow or failing API call delays only the drains, never the hub (requests
// are queued). Pods are API objects anyone allowed can shape: only their namespace, name,
// labels, node, phase, deletionTimestamp and resource names are read.

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "common/value.h"
#include "controller/kube/client.h"
#include "controller/server/hub.h"

namespace kmodd::source {

inline constexpr char kCordonedForAnnotation[] = "kmodd.io/cordoned-for";

// Whether Pod `pod` (an API object) is one the drain evicts: running on its node (not
// Succeeded or Failed), not a Module's plugin, and requesting (or limiting) one of
// `resources` or carrying every label of `selector` (an empty selector matches none).
bool DrainMatches(const Value& pod, const api::DrainSpec& spec);

class Drainer {
 public:
  // `done` reports each drain's end (Hub::DrainDone); it is called on the drainer's thread.
  using Done = std::function<void(const server::DrainRequest& r, bool drained,
                                  const std::string& message)>;
  Drainer(kube::KubeClient& client, Logger& log, const Clock& clock, Done done);
  ~Drainer();
  Drainer(const Drainer&) = delete;
  Drainer& operator=(const Drainer&) = delete;

  void Start();
  void Stop();

  // Queue only: safe under the hub's lock.
  void Request(const server::DrainRequest& r);
  void Release(const std::string& node, const std::string& module);

 private:
  struct Active {
    server::DrainRequest request;
    Clock::Monotonic deadline;
    bool cordon_done = false;
    std::map<std::string, bool> refused_logged;  // pod id -> its refusal was logged
  };
  void Worker();
  // One look at one drain: true when it ended (done_ called).
  bool Step(Active& a);
  absl::Status Cordon(const std::string& node, const std::string& module);
  void Uncordon(const std::string& node, const std::string& module);

  kube::KubeClient& client_;
  Logger& log_;
  const Clock& clock_;
  Done done_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<server::DrainRequest> requests_;
  std::vector<std::pair<std::string, std::string>> releases_;
  std::map<std::pair<std::string, std::string>, Active> active_;  // (node, module)
  std::thread worker_;
};

}  // namespace kmodd::source

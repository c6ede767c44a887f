#pragma once

// Kubernetes mode's source: Modules (modules.kmm.sigs.x-k8s.io/v1beta1, every namespace)
// and Nodes from the API server through list/watch, fed to the Hub; and the pull Secrets
// that Modules name in imageRepoSecret, read by name (never listed or watched) when such a
// Module is seen and again every few minutes, and handed to the Hub, which sends each only
// to the nodes whose plan runs a Module that names it.
//
// The device plugin and DRA driver Pods (plugin_pods.h) are watched too, and each node's
// summary handed to the Hub.
//
// Nodes are synced before the first Module update reaches the Hub, so the Hub's first
// plan (and so the first push) is made from every Node and every Module. A Module being
// deleted (deletionTimestamp set) leaves the plan at once: its nodes are told to unload it;
// the KubeWriter removes the finalizer once they report it gone.
//
// A Module that fails validation (created while no webhook ran, or written before a rule
// was added) keeps its last accepted version in force, if it had one; its problems go to
// the Hub as the source's errors, so they reach its status (Accepted=False). They hold
// nothing else back, with one exception: after a restart this run does not know the spec
// an earlier run accepted, so a rejected Module with kmodd's finalizer (it was planned) is
// held (SourceUpdate::held): the nodes that run it are sent nothing until it is fixed or
// deleted, since their desired state would unload it. What a pull Secret look-up
// found goes to the Hub too; a Secret that cannot be read is looked up again every
// kMissingSecretRecheck, so that its Modules' status clears soon after it is created.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/http/cancel.h"
#include "common/log.h"
#include "common/value.h"
#include "api/diagnostic.h"
#include "api/module.h"
#include "api/node.h"
#include "controller/kube/client.h"
#include "controller/server/hub.h"
#include "controller/kube_mode/module_policies.h"
#include "controller/kube_mode/plugin_pods.h"
#include "controller/kube_mode/pull_secret.h"

namespace kmodd::source {

// What the writer needs to know about one Module object besides its plan.
// kmodd's finalizer: it goes on every Module in the plan (see KubeWriter), so a Module
// that carries it may run on nodes even when this run never accepted it.
inline constexpr char kUnloadFinalizer[] = "kmodd.io/unload";

// A Node label naming the kernel its modules are loaded into, when that is not the kernel its
// kubelet runs on (the agent manages a DPU's or a VM's kernel for the node): it replaces
// status.nodeInfo.kernelVersion for planning. Whoever may label the Node (its kubelet
// included) could already set nodeInfo; the agent still refuses a plan for another kernel
// than its own.
inline constexpr char kKernelReleaseLabel[] = "kmodd.io/kernel-release";

struct ModuleMeta {
  std::string ns;
  std::string name;
  std::string uid;
  std::string resource_version;
  std::vector<std::string> finalizers;
  bool deleting = false;  // deletionTimestamp set
  bool planned = false;   // a version of it is in the plan (set by KubeSource::Modules)
  std::string Key() const { return ns + "/" + name; }
  bool HasUnloadFinalizer() const {
    return std::find(finalizers.begin(), finalizers.end(), kUnloadFinalizer) != finalizers.end();
  }
};

struct NodeMeta {
  std::string name;
  std::string uid;
  std::map<std::string, std::string> labels;
  bool unschedulable = false;  // cordoned
  std::vector<api::Taint> taints;
};

// Conversions, pure, for tests. A Module or Node object as the API returns it (list items
// lack kind and apiVersion; both are filled in). Errors name the object and the field.
[[nodiscard]] absl::StatusOr<api::Module> ModuleFromObject(const Value& object);
// The same, with every problem found (object "Module <namespace>/<name>", the field path,
// the message) in `errors` when it returns nullopt.
std::optional<api::Module> CheckModuleObject(const Value& object,
                                             std::vector<api::Diagnostic>& errors);
// The kmodd.io/kernel-release label, when set, is the node's kernel.
[[nodiscard]] absl::StatusOr<api::Node> NodeFromObject(const Value& object);
ModuleMeta ModuleMetaFromObject(const Value& object);
// The API path of Module <ns>/<name>.
std::string ModuleObjectPath(const std::string& ns, const std::string& name);
// What a failed look-up or check (DockerConfigFromSecret, pull_secret.h) of pull Secret `key`
// ("<namespace>/<name>") means for the Modules naming it: reason NotFound, WrongType,
// InvalidContent or Forbidden; nullopt for a transient failure (the last state stays).
std::optional<server::PullSecretState> PullSecretProblem(const std::string& key,
                                                         const absl::Status& error);

class KubeSource {
 public:
  // Waits and Secret look-up times are on `clock`.
  KubeSource(kube::KubeClient& client, server::Hub& hub, const Clock& clock, Logger& log);
  ~KubeSource();
  KubeSource(const KubeSource&) = delete;
  KubeSource& operator=(const KubeSource&) = delete;

  // Starts the watches on their own threads.
  void Start();
  void Stop();

  // Snapshots for the writer (thread-safe).
  std::vector<ModuleMeta> Modules();
  std::optional<ModuleMeta> Module(const std::string& key);
  std::optional<NodeMeta> Node(const std::string& name);
  // True once both collections have been listed.
  bool Synced() const { return modules_synced_.load(); }

  static constexpr std::chrono::minutes kSecretRefresh{3};
  static constexpr std::chrono::seconds kMissingSecretRecheck{5};

 private:
  // Logs a list-watch error: a 410 (relist follows) at info, anything else as a warning.
  void LogWatchError(const std::string& what, const absl::Status& e);
  void RunNodes();
  void RunModules();
  void RunSecrets();
  void RunPluginPods();
  void RunPolicies();
  void OnNodeSync(const std::vector<Value>& objects);
  void OnNodeEvent(kube::EventType type, const Value& object);
  void OnModuleSync(const std::vector<Value>& objects);
  void OnModuleEvent(kube::EventType type, const Value& object);
  // Decodes, remembers and returns the change to apply for one object (not yet applied).
  void Absorb(const Value& object, ModuleChanges& changes);
  void Forget(const std::string& key, ModuleChanges& changes);
  // Reads the secrets the planned Modules name, then applies `changes` to the Hub.
  void Apply(ModuleChanges changes);
  void RefreshSecret(const std::string& key);
  // Records the problems of a Module (none: accepted); true when they changed.
  bool SetRejectedLocked(const std::string& key, std::vector<api::Diagnostic> errors);
  // The rejected Modules this run never planned that carry kmodd's finalizer.
  std::set<std::string> HeldLocked() const;
  // Every Module object that carries kmodd's finalizer.
  std::set<std::string> FinalizedLocked() const;

  kube::KubeClient& client_;
  server::Hub& hub_;
  const Clock& clock_;
  Logger& log_;
  http::Cancellation stop_;
  std::thread nodes_thread_;
  std::thread modules_thread_;
  std::thread secrets_thread_;
  std::thread pods_thread_;
  std::thread policies_thread_;
  PolicyIndex policies_;  // the policies thread's own
  PluginPodIndex pods_;  // the pods thread's own
  std::atomic<bool> nodes_synced_{false};
  std::atomic<bool> modules_synced_{false};

  std::mutex mu_;
  std::condition_variable nodes_synced_cv_;  // with mu_: nodes_synced_ or stop_
  std::map<std::string, ModuleMeta> metas_;          // every Module object, by key
  std::map<std::string, std::string> planned_rv_;    // Modules in the plan: resourceVersion
  std::map<std::string, std::string> secret_of_;     // Module key -> "<ns>/<secret>"
  std::map<std::string, std::vector<api::Diagnostic>> rejected_;  // Module key -> problems
  bool rejected_changed_ = false;  // since the Hub was last told
  std::set<std::string> held_sent_;  // the last SourceUpdate::held
  std::set<std::string> finalized_sent_;  // the last SourceUpdate::finalized
  struct SecretCheck {
    Clock::Monotonic next;  // when to look it up again
    std::optional<server::PullSecretState> state;  // the last one reported (logged once)
    std::string transient;  // the last transient error logged, until a state is known
  };
  std::map<std::string, SecretCheck> secret_checks_;  // by "<ns>/<secret>"
  std::map<std::string, NodeMeta> nodes_;
};

}  // namespace kmodd::source

#pragma once

// kmodd's own resource next to KMM's Module (issue 15): ModulePolicy, kmodd.io/v1alpha1.
// It names one Module of its namespace and says how a change of that Module reaches the
// fleet (the rollout). The Module stays KMM's v1beta1, unchanged; a Module without a
// ModulePolicy is pushed to every selected node at once, as KMM does.
//
//   apiVersion: kmodd.io/v1alpha1
//   kind: ModulePolicy
//   metadata: {name: gpu, namespace: drivers}
//   spec:
//     moduleName: gpu            # required: the Module in the same namespace
//     paused: false              # `kmodd-controller rollout pause|resume` sets it
//     rollout:
//       maxParallel: 10%         # count or percentage of the selected nodes (default: all)
//       canary:
//         count: 2               # the first 2 nodes in rollout order, or
//         selector: {kmodd.io/canary: "true"}   # the nodes with these labels
//         pause: true            # wait for `rollout resume` after the canaries (default)
//         soakSeconds: 600       # or resume on its own once they were Ready this long
//       maxFailed: 1             # count or percentage: more Failed nodes halt the rollout
//       onFailure: Rollback      # Rollback (default) or Leave (for inspection)
//     readiness:
//       checks: [...]            # what must hold before a node is Ready (api/readiness.h)
//     drain:                     # Kubernetes mode: before a node's driver is replaced
//       cordon: true             # mark it unschedulable first (default); uncordoned when
//                                # Ready again, unless someone else had cordoned it
//       resources: [example.com/gpu]   # evict the Pods requesting these resources
//       podSelector: {app: trainer}    # and the Pods with these labels
//       timeoutSeconds: 300      # wait this long for them to go (default 300)
//       onTimeout: Fail          # Fail (default: the node keeps its driver, counts as
//                                # Failed) or Proceed (replace it anyway)
//
// `rollout resume` and `rollout undo` act on one revision of the Module (Module::revision):
// they record it in the annotations below, so that they do not carry over to the next
// change.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/diagnostic.h"
#include "api/object_meta.h"
#include "api/readiness.h"

namespace kmodd::api {

inline constexpr char kKmoddGroupVersion[] = "kmodd.io/v1alpha1";
// The Module revision whose canaries a person approved (`rollout resume`).
inline constexpr char kResumedRevisionAnnotation[] = "kmodd.io/resumed-revision";
// The Module revision a person rolled back (`rollout undo`): its nodes go back to what they
// ran before it, until the Module changes again.
inline constexpr char kUndoRevisionAnnotation[] = "kmodd.io/undo-revision";

// A count of nodes or a percentage of the selected nodes ("25%"), as Kubernetes'
// IntOrString.
struct NodeAmount {
  int64_t count = 0;
  std::optional<int> percent;
  bool operator==(const NodeAmount&) const = default;
  std::string ToString() const;
};

enum class OnFailure { kRollback, kLeave };
enum class OnDrainTimeout { kFail, kProceed };

// Draining a node's device users through the Eviction API (PodDisruptionBudgets honoured)
// before its driver is replaced or removed.
struct DrainSpec {
  bool cordon = true;
  std::vector<std::string> resources;             // extended resources the Pods request
  std::map<std::string, std::string> pod_selector;  // or labels they carry
  int64_t timeout_seconds = 300;
  OnDrainTimeout on_timeout = OnDrainTimeout::kFail;
  bool operator==(const DrainSpec&) const = default;
};

struct RolloutSpec {
  std::optional<NodeAmount> max_parallel;
  int64_t canary_count = 0;
  std::map<std::string, std::string> canary_selector;
  bool canary_pause = true;
  std::optional<int64_t> canary_soak_seconds;
  std::optional<NodeAmount> max_failed;
  OnFailure on_failure = OnFailure::kRollback;
  bool operator==(const RolloutSpec&) const = default;
};

struct ModulePolicy {
  ObjectMeta metadata;
  std::string module_name;
  bool paused = false;
  RolloutSpec rollout;
  std::vector<ReadinessCheck> readiness;  // spec.readiness.checks
  std::optional<DrainSpec> drain;
  bool operator==(const ModulePolicy&) const = default;

  // "<namespace>/<name>" of the policy object itself.
  std::string Key() const { return metadata.namespace_ + "/" + metadata.name; }
  // "<namespace>/<moduleName>": the Module it governs.
  std::string ModuleKey() const { return metadata.namespace_ + "/" + module_name; }
  std::string Annotation(const char* key) const {
    auto it = metadata.annotations.find(key);
    return it == metadata.annotations.end() ? std::string() : it->second;
  }
};

// Parses "3" or "25%" (0-100); the error says what is accepted.
[[nodiscard]] std::optional<NodeAmount> ParseNodeAmount(const std::string& text,
                                                        std::string& error);

// The rules the CRD's schema and the webhook apply past the types.
std::vector<FieldError> ValidateModulePolicy(const ModulePolicy& p);

}  // namespace kmodd::api

#pragma once

// The placer: Modules and Nodes in, the desired modules of every node out. Pure: no I/O,
// no clock, no protobuf. It is incremental: after the first plan, a change to one Module
// or one Node recomputes only the (node, module) pairs it can affect and reports which
// nodes' desired state changed, so that the controller pushes only to those.
//
// Ordered upgrade (KMM's version labels): when a Module sets `version`, the node label
// kmm.node.kubernetes.io/version-module.<namespace>.<name> decides. Absent: the node runs
// no version of it. Equal to the Module's version: it runs that version. Different: the
// node keeps the version it was planned with before, if the placer placed that version
// for this node's current kernel; otherwise it runs none (this placer has no memory of
// that version). This is what lets an operator move nodes to a new version one by one.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/module.h"
#include "api/node.h"
#include "controller/placement/mapping.h"

namespace kmodd::placement {

// Why a Module does not run on a node.
enum class SkipReason : uint8_t {
  kNoModuleLoader,    // the Module only deploys a device plugin or DRA driver
  kSelector,          // a selector label does not match
  kTaint,             // an untolerated NoExecute taint
  kNoKernel,          // the node reports no kernel version
  kNoMapping,         // no kernel mapping matches the node's kernel
  kMappingError,      // a mapping matched but could not be resolved (e.g. a bad variable)
  kNoVersionLabel,    // version set, node not labelled for it
  kVersionMismatch,   // labelled for another version that this node was never planned with
};

// One Module's decision for one node.
struct Decision {
  enum class Kind : uint8_t { kRun, kHold, kSkip };
  Kind kind = Kind::kSkip;
  SkipReason reason = SkipReason::kSelector;
  std::shared_ptr<const ResolvedConfig> config;  // kRun and kHold
  std::string detail;  // for kSkip: the taint, kernel, version label or error message

  bool Runs() const { return kind != Kind::kSkip; }
  // Whether a node would be sent the same thing: both not running (whatever the reason),
  // or both running equal configurations (run or held alike).
  bool SameDesired(const Decision& other) const;
};

// A module a node should run, in KMM NodeModulesConfig terms.
struct DesiredModule {
  const api::Module* module = nullptr;  // valid until the Module is changed or removed
  std::shared_ptr<const ResolvedConfig> config;
  bool held = false;  // kept at an earlier version by the ordered-upgrade label
};

struct SkippedModule {
  const api::Module* module = nullptr;
  SkipReason reason;
  std::string detail;
};

struct NodePlacement {
  const api::Node* node = nullptr;
  std::vector<DesiredModule> modules;  // sorted by namespace/name
  std::vector<SkippedModule> skipped;  // sorted by namespace/name
};

// A person-readable reason, e.g. "no kernel mapping matches kernel 6.1.0-27-cloud-amd64".
std::string DescribeSkip(const api::Module& m, const api::Node& n, SkipReason reason,
                         const std::string& detail);

// The label that pins a node to a version of a Module.
std::string VersionLabelKey(const api::Module& m);

class Placer {
 public:
  Placer() = default;
  Placer(const Placer&) = delete;
  Placer& operator=(const Placer&) = delete;

  // Each returns the names of the nodes whose desired modules changed, sorted.
  std::vector<std::string> SetModule(api::Module m);
  std::vector<std::string> RemoveModule(const std::string& namespace_name);
  std::vector<std::string> SetNode(api::Node n);
  std::vector<std::string> RemoveNode(const std::string& name);

  // The plan of one node (nullopt if unknown); of every node, sorted by node name.
  std::optional<NodePlacement> PlacementFor(const std::string& node) const;
  std::vector<NodePlacement> AllPlacements() const;

  size_t ModuleCount() const { return module_index_.size(); }
  size_t NodeCount() const { return node_index_.size(); }

 private:
  // Label keys and values as interned ids, sorted by key id. Only keys that some Module
  // selects on (or versions by) are indexed, so per-node strings such as hostnames stay
  // out of the table unless a Module asks for them.
  using LabelIds = std::vector<std::pair<uint32_t, uint32_t>>;
  static constexpr uint32_t kNoId = UINT32_MAX;

  struct ModuleSlot {
    std::unique_ptr<CompiledModule> compiled;
    LabelIds selector;
    uint32_t version_key = kNoId;    // the version label, when `version` is set
    uint32_t version_value = kNoId;  // the Module's version
    // Resolution per interned kernel id; filled lazily.
    mutable std::vector<std::optional<Decision>> by_kernel;
  };
  struct NodeSlot {
    std::unique_ptr<api::Node> node;
    LabelIds labels;
    uint32_t kernel_id = 0;
    std::vector<Decision> decisions;  // indexed by module slot
  };

  const std::vector<size_t>& NodeOrder();
  uint32_t InternKernel(const std::string& trimmed_kernel);
  uint32_t InternLabel(const std::string& s);
  // Marks a key as used by a Module; true if it was not before.
  bool UseKey(uint32_t key);
  LabelIds IndexLabels(const api::Node& n);
  static uint32_t Find(const LabelIds& labels, uint32_t key);
  const Decision& ResolveForKernel(const ModuleSlot& m, uint32_t kernel_id) const;
  Decision Decide(const ModuleSlot& m, const NodeSlot& n, const Decision& previous) const;
  // Recomputes one module on every node; returns the changed nodes.
  std::vector<std::string> RecomputeModule(size_t slot);
  NodePlacement BuildPlacement(const NodeSlot& n) const;

  std::vector<ModuleSlot> modules_;
  std::vector<size_t> free_modules_;
  std::map<std::string, size_t> module_index_;  // "namespace/name" -> slot, sorted

  std::vector<NodeSlot> nodes_;
  std::vector<size_t> free_nodes_;
  std::map<std::string, size_t> node_index_;  // name -> slot, sorted
  std::vector<size_t> node_order_;            // node_index_'s slots in order; empty when stale

  std::unordered_map<std::string, uint32_t> label_ids_;
  std::vector<const std::string*> label_strings_;  // by id, pointing into label_ids_ keys
  std::vector<bool> key_used_;                     // by id

  std::unordered_map<std::string, uint32_t> kernel_ids_;
  std::vector<std::string> kernels_;  // by id; id 0 is "no kernel reported"
};

// The whole plan in one call, for the CLI and tests.
struct PlacementResult {
  std::unique_ptr<Placer> placer;  // owns what the NodePlacements point to
  std::vector<NodePlacement> nodes;
};
PlacementResult PlaceOnce(std::vector<api::Module> modules, std::vector<api::Node> nodes);

}  // namespace kmodd::placement

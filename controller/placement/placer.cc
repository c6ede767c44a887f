#include "controller/placement/placer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "controller/placement/kernel_version.h"
#include "controller/placement/selection.h"

namespace kmodd::placement {

namespace {

Decision Skip(SkipReason reason, std::string detail = {}) {
  Decision d;
  d.kind = Decision::Kind::kSkip;
  d.reason = reason;
  d.detail = std::move(detail);
  return d;
}

Decision WithConfig(Decision::Kind kind, std::shared_ptr<const ResolvedConfig> config) {
  Decision d;
  d.kind = kind;
  d.config = std::move(config);
  return d;
}

// The slot of `key`, or a fresh one (reused from `free` or appended) registered for it.
template <typename Slot>
size_t AcquireSlot(const std::string& key, std::map<std::string, size_t>& index,
                   std::vector<size_t>& free, std::vector<Slot>& slots) {
  if (auto it = index.find(key); it != index.end()) {
    return it->second;
  }
  size_t slot = slots.size();
  if (free.empty()) {
    slots.emplace_back();
  } else {
    slot = free.back();
    free.pop_back();
    slots[slot] = Slot{};
  }
  index.emplace(key, slot);
  return slot;
}

}  // namespace

bool Decision::SameDesired(const Decision& other) const {
  if (Runs() != other.Runs()) {
    return false;
  }
  return !Runs() || config == other.config || *config == *other.config;
}

std::string VersionLabelKey(const api::Module& m) {
  return absl::StrCat("kmm.node.kubernetes.io/version-module.", m.metadata.namespace_, ".",
                      m.metadata.name);
}

std::string DescribeSkip(const api::Module& m, const api::Node& n, SkipReason reason,
                         const std::string& detail) {
  switch (reason) {
    case SkipReason::kNoModuleLoader:
      return "the Module has no moduleLoader (device plugin or DRA only)";
    case SkipReason::kSelector: {
      // Recomputed here rather than stored: most pairs are selector misses, and a plan of
      // thousands of nodes should not carry a string for each.
      const auto key = FirstSelectorMismatch(m.spec.selector, n.metadata.labels);
      if (!key) {
        return "selector: no longer matches";
      }
      return absl::StrCat("selector: node lacks label ", *key, "=\"", m.spec.selector.at(*key),
                          "\"");
    }
    case SkipReason::kTaint:
      return absl::StrCat("untolerated NoExecute taint ", detail);
    case SkipReason::kNoKernel:
      return "the node reports no kernel version (status.nodeInfo.kernelVersion)";
    case SkipReason::kNoMapping:
      return absl::StrCat("no kernel mapping matches kernel ", detail);
    case SkipReason::kMappingError:
      return absl::StrCat("mapping error: ", detail);
    case SkipReason::kNoVersionLabel:
      return absl::StrCat("version ", m.spec.module_loader->container.version,
                          " is set and the node has no label ", VersionLabelKey(m));
    case SkipReason::kVersionMismatch:
      return absl::StrCat("the node is labelled for version ", detail, ", the Module is at ",
                          m.spec.module_loader->container.version,
                          ", and this node was never planned with ", detail);
  }
  return "unknown";
}

uint32_t Placer::InternKernel(const std::string& trimmed_kernel) {
  if (kernels_.empty()) {
    kernels_.emplace_back();  // id 0: no kernel
  }
  if (trimmed_kernel.empty()) {
    return 0;
  }
  auto [it, inserted] =
      kernel_ids_.emplace(trimmed_kernel, static_cast<uint32_t>(kernels_.size()));
  if (inserted) {
    kernels_.push_back(trimmed_kernel);
  }
  return it->second;
}

const std::vector<size_t>& Placer::NodeOrder() {
  if (node_order_.empty()) {  // cleared whenever a node is added or removed
    node_order_.reserve(node_index_.size());
    for (const auto& [name, slot] : node_index_) {
      node_order_.push_back(slot);
    }
  }
  return node_order_;
}

uint32_t Placer::InternLabel(const std::string& s) {
  auto [it, inserted] = label_ids_.emplace(s, static_cast<uint32_t>(label_strings_.size()));
  if (inserted) {
    label_strings_.push_back(&it->first);  // node keys of unordered_map are stable
    key_used_.push_back(false);
  }
  return it->second;
}

bool Placer::UseKey(uint32_t key) {
  if (key_used_[key]) {
    return false;
  }
  key_used_[key] = true;
  return true;
}

Placer::LabelIds Placer::IndexLabels(const api::Node& n) {
  LabelIds ids;
  for (const auto& [k, v] : n.metadata.labels) {
    auto it = label_ids_.find(k);
    if (it != label_ids_.end() && key_used_[it->second]) {
      ids.emplace_back(it->second, InternLabel(v));
    }
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

uint32_t Placer::Find(const LabelIds& labels, uint32_t key) {
  auto it = std::lower_bound(labels.begin(), labels.end(), std::make_pair(key, uint32_t{0}));
  return it != labels.end() && it->first == key ? it->second : kNoId;
}

const Decision& Placer::ResolveForKernel(const ModuleSlot& m, uint32_t kernel_id) const {
  if (m.by_kernel.size() <= kernel_id) {
    m.by_kernel.resize(kernels_.size());
  }
  auto& cached = m.by_kernel[kernel_id];
  if (!cached) {
    const std::string& kernel = kernels_[kernel_id];
    auto r = m.compiled->Resolve(kernel);
    if (!r.ok()) {
      cached = Skip(SkipReason::kMappingError, std::string(r.status().message()));
    } else if (!r->has_value()) {
      cached = Skip(SkipReason::kNoMapping, kernel);
    } else {
      cached = WithConfig(Decision::Kind::kRun,
                          std::make_shared<const ResolvedConfig>(std::move(**r)));
    }
  }
  return *cached;
}

Decision Placer::Decide(const ModuleSlot& m, const NodeSlot& n, const Decision& previous) const {
  const api::Module& mod = m.compiled->module();
  const api::Node& node = *n.node;
  if (!mod.spec.module_loader) {
    return Skip(SkipReason::kNoModuleLoader);
  }
  for (const auto& [key, value] : m.selector) {
    if (Find(n.labels, key) != value) {
      return Skip(SkipReason::kSelector);
    }
  }
  if (const api::Taint* t = FirstUntoleratedNoExecute(node.taints, mod.spec.tolerations)) {
    return Skip(SkipReason::kTaint, absl::StrCat(t->key, "=", t->value, ":", t->effect));
  }
  if (n.kernel_id == 0) {
    return Skip(SkipReason::kNoKernel);
  }
  const Decision& resolved = ResolveForKernel(m, n.kernel_id);
  if (!resolved.Runs() || m.version_key == kNoId) {
    return resolved;
  }
  const uint32_t label = Find(n.labels, m.version_key);
  if (label == kNoId) {
    return Skip(SkipReason::kNoVersionLabel);
  }
  if (label == m.version_value) {
    return resolved;
  }
  const std::string& labelled = *label_strings_[label];
  if (previous.Runs() && previous.config->version == labelled &&
      previous.config->kernel_version == kernels_[n.kernel_id]) {
    return WithConfig(Decision::Kind::kHold, previous.config);
  }
  return Skip(SkipReason::kVersionMismatch, labelled);
}

std::vector<std::string> Placer::RecomputeModule(size_t slot) {
  std::vector<std::string> changed;
  const ModuleSlot& m = modules_[slot];
  for (const size_t node_slot : NodeOrder()) {  // by name: `changed` comes out sorted
    NodeSlot& n = nodes_[node_slot];
    if (n.decisions.size() <= slot) {
      // Grow geometrically: a full plan adds Modules one by one to every node.
      n.decisions.resize(std::max(modules_.size(), n.decisions.size() * 2));
    }
    Decision d = m.compiled ? Decide(m, n, n.decisions[slot]) : Decision{};
    if (!d.SameDesired(n.decisions[slot])) {
      changed.push_back(n.node->metadata.name);
    }
    n.decisions[slot] = std::move(d);
  }
  return changed;
}

std::vector<std::string> Placer::SetModule(api::Module m) {
  const size_t slot = AcquireSlot(m.Key(), module_index_, free_modules_, modules_);
  ModuleSlot& ms = modules_[slot];
  bool new_keys = false;
  ms.selector.clear();
  for (const auto& [k, v] : m.spec.selector) {
    const uint32_t key = InternLabel(k);
    new_keys = UseKey(key) || new_keys;
    ms.selector.emplace_back(key, InternLabel(v));
  }
  ms.version_key = kNoId;
  ms.version_value = kNoId;
  if (m.spec.module_loader && !m.spec.module_loader->container.version.empty()) {
    ms.version_key = InternLabel(VersionLabelKey(m));
    new_keys = UseKey(ms.version_key) || new_keys;
    ms.version_value = InternLabel(m.spec.module_loader->container.version);
  }
  if (new_keys) {  // nodes were indexed without these keys
    for (auto& [name, node_slot] : node_index_) {
      nodes_[node_slot].labels = IndexLabels(*nodes_[node_slot].node);
    }
  }
  ms.compiled = std::make_unique<CompiledModule>(std::move(m));
  ms.by_kernel.clear();
  return RecomputeModule(slot);
}

std::vector<std::string> Placer::RemoveModule(const std::string& namespace_name) {
  auto it = module_index_.find(namespace_name);
  if (it == module_index_.end()) {
    return {};
  }
  const size_t slot = it->second;
  module_index_.erase(it);
  modules_[slot] = ModuleSlot{};
  auto changed = RecomputeModule(slot);  // every node now holds an empty decision
  free_modules_.push_back(slot);
  return changed;
}

std::vector<std::string> Placer::SetNode(api::Node n) {
  const std::string name = n.metadata.name;
  const size_t known = node_index_.size();
  const size_t slot = AcquireSlot(name, node_index_, free_nodes_, nodes_);
  if (node_index_.size() != known) {
    node_order_.clear();
  }
  NodeSlot& ns = nodes_[slot];
  ns.kernel_id = InternKernel(std::string(TrimKernelPlus(n.node_info.kernel_version)));
  ns.labels = IndexLabels(n);
  ns.node = std::make_unique<api::Node>(std::move(n));
  ns.decisions.resize(modules_.size());
  bool changed = false;
  for (const auto& [key, mslot] : module_index_) {
    Decision d = Decide(modules_[mslot], ns, ns.decisions[mslot]);
    if (!d.SameDesired(ns.decisions[mslot])) {
      changed = true;
    }
    ns.decisions[mslot] = std::move(d);
  }
  return changed ? std::vector<std::string>{name} : std::vector<std::string>{};
}

std::vector<std::string> Placer::RemoveNode(const std::string& name) {
  auto it = node_index_.find(name);
  if (it == node_index_.end()) {
    return {};
  }
  nodes_[it->second] = NodeSlot{};
  free_nodes_.push_back(it->second);
  node_index_.erase(it);
  node_order_.clear();
  return {name};
}

NodePlacement Placer::BuildPlacement(const NodeSlot& n) const {
  NodePlacement p;
  p.node = n.node.get();
  for (const auto& [key, mslot] : module_index_) {
    const api::Module* mod = &modules_[mslot].compiled->module();
    const Decision& d = n.decisions[mslot];
    if (d.Runs()) {
      p.modules.push_back(DesiredModule{mod, d.config, d.kind == Decision::Kind::kHold});
    } else {
      p.skipped.push_back(SkippedModule{mod, d.reason, d.detail});
    }
  }
  return p;
}

std::optional<NodePlacement> Placer::PlacementFor(const std::string& node) const {
  auto it = node_index_.find(node);
  if (it == node_index_.end()) {
    return std::nullopt;
  }
  return BuildPlacement(nodes_[it->second]);
}

std::vector<NodePlacement> Placer::AllPlacements() const {
  std::vector<NodePlacement> out;
  out.reserve(node_index_.size());
  for (const auto& [name, slot] : node_index_) {
    out.push_back(BuildPlacement(nodes_[slot]));
  }
  return out;
}

PlacementResult PlaceOnce(std::vector<api::Module> modules, std::vector<api::Node> nodes) {
  PlacementResult r;
  r.placer = std::make_unique<Placer>();
  // Nodes first: each module is then decided for every node in one pass.
  for (auto& n : nodes) {
    r.placer->SetNode(std::move(n));
  }
  for (auto& m : modules) {
    r.placer->SetModule(std::move(m));
  }
  r.nodes = r.placer->AllPlacements();
  return r;
}

}  // namespace kmodd::placement

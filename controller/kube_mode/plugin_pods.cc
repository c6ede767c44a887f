#include "controller/kube_mode/plugin_pods.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "api/names.h"
#include "common/json.h"
#include "controller/kube_mode/dra_daemonset.h"
#include "controller/kube_mode/plugin_daemonset.h"

namespace kmodd::source {

namespace {

bool ReadyCondition(const Value& pod) {
  const Value* conditions = Lookup(pod, {"status", "conditions"});
  if (conditions == nullptr || !conditions->IsList()) {
    return false;
  }
  for (const Value& c : conditions->AsList()) {
    if (StringAt(c, {"type"}) == "Ready") {
      return StringAt(c, {"status"}) == "True";
    }
  }
  return false;
}

}  // namespace

std::optional<PluginPod> PluginPodFromObject(const Value& pod) {
  const std::string ns = StringAt(pod, {"metadata", "namespace"});
  const std::string name = StringAt(pod, {"metadata", "name"});
  const Value* labels = Lookup(pod, {"metadata", "labels"});
  if (ns.empty() || name.empty() || labels == nullptr || !labels->IsMap()) {
    return std::nullopt;
  }
  const std::string module = StringAt(*labels, {server::kModuleNameLabel});
  const std::string role = StringAt(*labels, {server::kRoleLabel});
  if (!api::IsDnsLabel(ns) || !api::IsDnsSubdomain(module) ||
      (role != server::kDevicePluginRole && role != server::kDraRole)) {
    return std::nullopt;
  }
  PluginPod p;
  p.id = absl::StrCat(ns, "/", name);
  p.module_key = absl::StrCat(ns, "/", module);
  p.node = StringAt(pod, {"spec", "nodeName"});
  p.dra = role == server::kDraRole;
  const Value* deleting = Lookup(pod, {"metadata", "deletionTimestamp"});
  p.ready = (deleting == nullptr || deleting->IsNull()) && ReadyCondition(pod);
  return p;
}

server::NodePluginPods PluginPodIndex::Summary(const std::string& node) const {
  server::NodePluginPods out;
  auto it = by_node_.find(node);
  if (it == by_node_.end()) {
    return out;
  }
  for (const auto& [id, p] : it->second) {
    server::ModulePods& m = out[p.module_key];
    if (p.ready) {
      (p.dra ? m.dra_ready : m.device_plugin_ready) = true;
    }
  }
  return out;
}

void PluginPodIndex::Remove(const std::string& id) {
  auto n = node_of_.find(id);
  if (n == node_of_.end()) {
    return;
  }
  auto pods = by_node_.find(n->second);
  if (pods != by_node_.end()) {
    pods->second.erase(id);
    if (pods->second.empty()) {
      by_node_.erase(pods);
    }
  }
  node_of_.erase(n);
}

PluginPodIndex::Summaries PluginPodIndex::Sync(const std::vector<Value>& objects) {
  by_node_.clear();
  node_of_.clear();
  for (const Value& o : objects) {
    std::optional<PluginPod> p = PluginPodFromObject(o);
    if (!p || p->node.empty()) {
      continue;
    }
    node_of_[p->id] = p->node;
    by_node_[p->node][p->id] = *p;
  }
  Summaries out;
  for (const auto& [node, pods] : by_node_) {
    out[node] = Summary(node);
  }
  return out;
}

std::vector<std::pair<std::string, server::NodePluginPods>> PluginPodIndex::Apply(
    kube::EventType type, const Value& object) {
  std::set<std::string> touched;
  std::optional<PluginPod> p = PluginPodFromObject(object);
  const std::string id = absl::StrCat(StringAt(object, {"metadata", "namespace"}), "/",
                                      StringAt(object, {"metadata", "name"}));
  if (auto n = node_of_.find(id); n != node_of_.end()) {
    touched.insert(n->second);
  }
  // A Pod whose labels no longer make it one of ours is gone from the index, as if deleted.
  Remove(id);
  if (type != kube::EventType::kDeleted && p && !p->node.empty()) {
    node_of_[p->id] = p->node;
    by_node_[p->node][p->id] = *p;
    touched.insert(p->node);
  }
  std::vector<std::pair<std::string, server::NodePluginPods>> out;
  out.reserve(touched.size());
  for (const std::string& node : touched) {
    out.emplace_back(node, Summary(node));
  }
  return out;
}

}  // namespace kmodd::source

#pragma once

// Kubernetes mode's view of the device plugin and DRA driver Pods (those labelled
// kmm.node.kubernetes.io/module.name with role device-plugin or dra, in any namespace):
// which Modules have one on each node, and whether it is Ready. KubeSource watches them
// and hands each node's summary to the Hub (server/plugin_pods.h), which keeps a module
// loaded under its plugin; the node labeler writes .device-plugin-ready and .dra-ready
// from it.
//
// Pods are API objects anyone allowed to create Pods in a namespace can shape: a Pod that
// is not one of ours by its labels, or whose fields have other types, is left out, and
// nothing in it is trusted beyond the node it names (spec.nodeName), its namespace and
// labels, its deletionTimestamp and its Ready condition. A Pod pretending to be a Module's
// plugin can at most hold that Module's unload on its node, which creating Pods in the
// Module's namespace allows anyway (the namespace's owner).

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/value.h"
#include "controller/kube/client.h"
#include "controller/server/plugin_pods.h"

namespace kmodd::source {

// Every Pod the watch asks for: those with the module.name label (the role is checked
// here, so that the selector is a plain existence test any server and fake understand).
inline constexpr char kPluginPodSelector[] = "kmm.node.kubernetes.io/module.name";

struct PluginPod {
  std::string id;          // "<namespace>/<name>" of the Pod
  std::string module_key;  // "<namespace>/<module.name label>"
  std::string node;        // spec.nodeName; "" while not scheduled
  bool dra = false;        // role dra; else device-plugin
  bool ready = false;      // the Ready condition is True and it is not being deleted
};

// nullopt when the object is not a device plugin or DRA Pod of a Module (another role, a
// label missing or malformed, metadata of the wrong type).
std::optional<PluginPod> PluginPodFromObject(const Value& pod);

class PluginPodIndex {
 public:
  using Summaries = std::map<std::string, server::NodePluginPods>;  // by node

  // A fresh list: every node's summary (nodes without a Pod are not listed).
  Summaries Sync(const std::vector<Value>& objects);
  // One watch event: the nodes whose summary it may have changed, with their summary now.
  std::vector<std::pair<std::string, server::NodePluginPods>> Apply(kube::EventType type,
                                                                    const Value& object);

 private:
  server::NodePluginPods Summary(const std::string& node) const;
  void Remove(const std::string& id);

  std::map<std::string, std::map<std::string, PluginPod>> by_node_;  // node -> id -> Pod
  std::map<std::string, std::string> node_of_;                        // id -> node
};

}  // namespace kmodd::source

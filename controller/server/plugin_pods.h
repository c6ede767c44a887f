#pragma once

// The device plugin and DRA driver Pods of the Modules on one node, as Kubernetes mode's
// Pod watch sees them (controller/kube_mode/plugin_pods.h). The hub keeps a module loaded
// under them (it holds back an unload or an image change of that Module on that node while
// one is there); the node labeler writes .device-plugin-ready and .dra-ready from them; the
// Module status counts the Ready ones.

#include <map>
#include <string>

namespace kmodd::server {

// What runs of one Module on one node. An entry exists while any such Pod exists there,
// in any phase, Terminating included: the plugin may still hold the device.
struct ModulePods {
  bool device_plugin_ready = false;  // a device plugin Pod is Ready and not being deleted
  bool dra_ready = false;            // the same for a DRA driver Pod
  bool operator==(const ModulePods&) const = default;
};

using NodePluginPods = std::map<std::string, ModulePods>;  // by Module "<ns>/<name>"

}  // namespace kmodd::server

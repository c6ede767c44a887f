#pragma once

// The part of a Kubernetes Node (core/v1) that the planner reads.

#include <map>
#include <string>
#include <vector>

#include "api/object_meta.h"

namespace kmodd::api {

struct Taint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule, PreferNoSchedule, NoExecute
  bool operator==(const Taint&) const = default;
};

struct NodeInfo {
  std::string kernel_version;
  std::string boot_id;
  std::string architecture;
  std::string os_image;
  bool operator==(const NodeInfo&) const = default;
};

struct Node {
  ObjectMeta metadata;
  bool unschedulable = false;
  std::vector<Taint> taints;
  NodeInfo node_info;
  bool operator==(const Node&) const = default;
};

}  // namespace kmodd::api

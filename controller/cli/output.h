#pragma once

// How a plan is printed: a `v1 List` of KMM NodeModulesConfig objects (yaml/json), or a
// table for people that also says why each untargeted node is untargeted.

#include <string>
#include <vector>

#include "common/value.h"
#include "controller/placement/placer.h"

namespace kmodd::cli {

// A scalar of a status document as text: a string as is, a number or a boolean spelled
// out, "" for absent or null, "?" for a list or a map.
std::string ScalarText(const Value* v);

// The NodeModulesConfig of one node (KMM's shape: spec.modules[] with name, namespace,
// imageRepoSecret, serviceAccountName, version, tolerations and config).
Value NodeModulesConfigValue(const placement::NodePlacement& p);

// A v1 List of the NodeModulesConfigs of every node that runs at least one module.
Value PlacementListValue(const std::vector<placement::NodePlacement>& plans);

// One row per (node, module): what runs, what is held, and why the rest does not run.
std::string PlacementTable(const std::vector<placement::NodePlacement>& plans);

}  // namespace kmodd::cli

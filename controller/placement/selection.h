#pragma once

// Which nodes a Module may run on: selector label equality, and NoExecute taints.
// Unlike KMM, cordoning (spec.unschedulable) and NoSchedule taints do not take modules
// away from a node: a module is not a pod, and unloading a NIC or storage driver because
// a node was cordoned for maintenance is the opposite of what the operator wanted.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/module.h"
#include "api/node.h"

namespace kmodd::placement {

// The first selector key the node's labels do not satisfy, or nullopt when all match.
std::optional<std::string> FirstSelectorMismatch(const std::map<std::string, std::string>& selector,
                                                 const std::map<std::string, std::string>& labels);

// Kubernetes' toleration matching (core/v1 Toleration.ToleratesTaint).
bool Tolerates(const api::Toleration& t, const api::Taint& taint);

// The first NoExecute taint of the node that none of the tolerations tolerate.
const api::Taint* FirstUntoleratedNoExecute(const std::vector<api::Taint>& taints,
                                            const std::vector<api::Toleration>& tolerations);

// Whether a Pod of the Module's (its device plugin's, its DRA driver's) may be scheduled on
// a node, KMM's rule for them (unlike the module's own): the selector matches, the node is
// not cordoned, and every NoSchedule and NoExecute taint is tolerated.
bool PodSchedulable(const api::Module& m, const std::map<std::string, std::string>& labels,
                    bool unschedulable, const std::vector<api::Taint>& taints);

}  // namespace kmodd::placement

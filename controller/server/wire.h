#pragma once

// Between the Sync protocol's messages and what the planner and the status read: the gRPC
// edge's conversions, in one place.

#include <string>
#include <vector>

#include "api/node.h"
#include "controller/plan/planner.h"
#include "controller/server/status.h"
#include "kmodd/v1/sync.pb.h"

namespace kmodd::server {

// The Node the planner sees for an agent's hello: its name, the labels of its
// configuration, and status.nodeInfo from its report. Agents have no taints and are never
// cordoned in standalone mode.
api::Node NodeFromInfo(const v1::NodeInfo& info);

// A node's desired state: one ModuleSpec per module its plan runs (held ones included).
v1::NodeDesired DesiredFromPlan(const plan::NodePlan& p, const std::string& version);

// Reported modules, sorted by namespace/name.
std::vector<ReportedModule> ReportedFromProto(
    const google::protobuf::RepeatedPtrField<v1::ModuleStatus>& modules);

// Pending, Pulling, Loading, Loaded, Unloading, Failed ("Unknown" for anything else).
std::string PhaseName(v1::Phase p);

}  // namespace kmodd::server

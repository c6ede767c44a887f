#pragma once

// The agent's plain types <-> their protobuf form: the only file of the agent's server
// that maps fields, used by the Sync client and the local service.

#include "absl/status/statusor.h"
#include "kmodd/v1/agent.pb.h"
#include "kmodd/v1/sync.pb.h"
#include "node-agent/server/agent_state.h"
#include "node-agent/server/node_info.h"
#include "node-agent/server/pass_planner.h"

namespace kmodd::agent {

v1::NodeInfo ToProto(const NodeFacts& f);
v1::ErrorClass ToProto(ErrorClass c);
v1::ModuleStatus ToProto(const ModuleStatus& s);
v1::Event ToProto(const AgentEvent& e);

// A full report: every Module and the version in force (no hello, no ack).
v1::NodeReport Report(const AgentSnapshot& s);

// The desired state a push carries, or why it cannot be accepted (the first bad module).
[[nodiscard]] absl::StatusOr<DesiredState> FromProto(const v1::NodeDesired& d,
                                                     const std::string& source);

}  // namespace kmodd::agent

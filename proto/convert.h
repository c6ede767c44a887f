#pragma once

// Between the API types the planner and the reconciler use and their wire form. The only
// place either side touches protobuf for module specs (convert at the gRPC edge).

#include "absl/status/statusor.h"
#include "api/node_modules_config.h"
#include "api/phase.h"
#include "kmodd/v1/sync.pb.h"

namespace kmodd::proto {

v1::ModuleSpec ToProto(const api::NodeModuleSpec& spec);
// Replaces the entry's readiness checks (the hub adds the ModulePolicy's to each entry).
void SetReadiness(const std::vector<api::ReadinessCheck>& checks, v1::ModuleSpec& out);
// Checks what the agent relies on (names, kernel version, image, module name) and every
// rule of api::ValidateNodeModuleSpec (the controller's validation of a Module, as it bears
// on one node's entry): the message names the module and each field. The agent converts
// every entry it is given here, from the controller or from `agentctl load`.
[[nodiscard]] absl::StatusOr<api::NodeModuleSpec> FromProto(const v1::ModuleSpec& spec);

// All modules of a desired state, or the first module's error.
[[nodiscard]] absl::StatusOr<std::vector<api::NodeModuleSpec>> FromProto(
    const v1::NodeDesired& desired);

// The one mapping between the phase and its wire enum, both ways. The wire's
// PHASE_UNSPECIFIED, and any value this build does not know (a newer peer), is kUnknown.
v1::Phase ToProto(api::Phase p);
api::Phase FromProto(v1::Phase p);

}  // namespace kmodd::proto

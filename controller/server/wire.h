#pragma once

// Between the Sync protocol's messages and what the planner and the status read: the gRPC
// edge's conversions, in one place.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/node.h"
#include "controller/placement/placer.h"
#include "controller/server/status.h"
#include "kmodd/v1/sync.pb.h"

namespace kmodd::server {

// What one report may carry. A node is one machine: a compromised one must not make the
// controller sort, compare or keep more than this (the message itself is bounded by the
// Sync server's receive limit).
struct ReportLimits {
  size_t max_modules = 4096;  // module entries per report: more refuses the report
  size_t max_labels = 1024;   // node.labels: more refuses the report
  size_t max_text = 1024;     // bytes of one message, digest, version, error: more is cut
};

// `s` when it has at most `max` bytes; otherwise its first bytes (whole UTF-8 characters)
// and a marker saying how long it was.
std::string Truncated(std::string_view s, size_t max);

// InvalidArgument (naming the field) for a node name longer than a Kubernetes name may be,
// or labels over the limits; ResourceExhausted for too many labels.
[[nodiscard]] absl::Status CheckNodeInfo(const v1::NodeInfo& info, const ReportLimits& limits);

// The Node the planner sees for an agent's hello: its name, the labels of its
// configuration, and status.nodeInfo from its report (texts cut to limits.max_text).
// Agents have no taints and are never cordoned in standalone mode.
api::Node NodeFromInfo(const v1::NodeInfo& info, const ReportLimits& limits = {});

// A node's desired state: one ModuleSpec per module its plan runs (held ones included).
v1::NodeDesired DesiredFromPlacement(const placement::NodePlacement& p, const std::string& version);

// A report's modules as the controller keeps them: sorted by key, one per key, texts cut
// to limits.max_text. An entry whose namespace is no DNS label or whose name is no DNS
// subdomain (RFC 1123, as the API server requires of a Module) names no Module: it is left
// out and counted, as is a second entry for the same key.
struct ReportedModules {
  std::vector<ReportedModule> modules;
  size_t bad_names = 0;
  size_t repeated = 0;
  std::string first_bad_name;  // cut to 80 bytes, for the log
};

// ResourceExhausted, naming the cap, for more than limits.max_modules entries (nothing is
// converted: the caller keeps what it had).
[[nodiscard]] absl::StatusOr<ReportedModules> ReportedFromProto(
    const google::protobuf::RepeatedPtrField<v1::ModuleStatus>& modules,
    const ReportLimits& limits);

}  // namespace kmodd::server

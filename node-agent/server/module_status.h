#pragma once

// What the agent reports per Module, as plain types (converted to protobuf at the gRPC
// edge, wire.h), and the pure rule that derives a Module's phase from what the reconciler
// knows about it.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "api/phase.h"
#include "node-agent/reconcile/journal.h"

namespace kmodd::agent {

enum class ErrorClass { kNone, kRetry, kWait, kTerminal };

// The kernel layer's classification (kernel::OutcomeOf) as the operator sees it; an image
// pull the registry refused (Unauthenticated) is retried.
ErrorClass ClassOf(const absl::Status& s);

// One readiness check's state on the load in force (server/readiness.h).
struct CheckResult {
  std::string name;
  std::string state;  // Waiting, Passed, Failed
  std::string message;
  bool operator==(const CheckResult&) const = default;
};

struct ModuleStatus {
  std::string key;  // namespace/name
  std::string namespace_;
  std::string name;
  api::Phase phase = api::Phase::kPending;
  std::string message;
  ErrorClass error_class = ErrorClass::kNone;
  std::string image;
  std::string image_digest;
  std::string version;
  std::vector<std::string> kernel_modules;
  std::vector<std::string> firmware;
  int64_t since_unix_ms = 0;    // set by AgentState when the phase changes
  int64_t updated_unix_ms = 0;  // set by AgentState when anything changes
  int64_t pull_bytes_done = 0;
  int64_t pull_bytes_total = 0;
  std::string desired_version;
  // One sentence each: staged firmware shadowing the host's (see firmware/shadow.h).
  std::vector<std::string> warnings;
  std::vector<CheckResult> checks;  // the readiness checks, in their order

  // Equality on what the reconciler decides, not on the timestamps AgentState stamps.
  bool SameAs(const ModuleStatus& o) const;
};

// Everything the reconciler knows about one Module at the end of (or during) a pass.
struct ModuleFacts {
  bool desired = false;     // in the desired state (or a load override)
  bool pulling = false;     // its image is being fetched
  enum class Acting { kNone, kLoad, kUnload } acting = Acting::kNone;
  absl::Status problem;     // preparation failed (image, tree, vermagic, kernel version)
  absl::Status last_error;  // the last action on it failed
  bool converged = false;   // loaded exactly as desired
  bool retry_scheduled = false;  // a failure will be retried (not terminal)
  const reconcile::JournalEntry* journal = nullptr;  // what kmodd did for it, if anything
};

struct DerivedPhase {
  api::Phase phase;
  std::string message;
  ErrorClass error_class = ErrorClass::kNone;
  bool operator==(const DerivedPhase&) const = default;
};

// In order: an action in progress; a pull; loaded as desired; a preparation problem; a
// failed action; otherwise waiting (Pending, or Unloading for a Module no longer desired).
DerivedPhase DerivePhase(const ModuleFacts& f);

}  // namespace kmodd::agent

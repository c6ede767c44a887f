#pragma once

// Every errno the kernel returns from loading or unloading a module, classified once, in
// one table (systemd's module-util is the model). The class decides what the reconciler
// does: success, retry soon, wait for something to change, or report and stop.

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace kmodd::kernel {

enum class KernelOp { kInsert, kRemove };

enum class Outcome {
  kSuccess,        // e.g. EEXIST on insert (after a state check), ENOENT on remove
  kRetry,          // transient: EBUSY, EAGAIN, ENOMEM (Unavailable)
  kWaitForChange,  // needs a new image or a change on the node (FailedPrecondition)
  kNotPermitted,   // lockdown, signature enforcement, no CAP_SYS_MODULE (PermissionDenied)
  kSpecError,      // the Module's spec is wrong, e.g. a bad parameter (InvalidArgument)
  kUnknown,        // anything else (Unknown)
};

struct Classification {
  Outcome outcome;
  absl::StatusCode code;  // the Status code that carries the outcome
  const char* meaning;    // for people: what happened and what to do
};

Classification Classify(KernelOp op, int err);

// The Status for a failed operation on `module` (from `path` when known), or OkStatus when
// the errno means success. The message says what happened and what to do.
absl::Status KernelError(KernelOp op, int err, std::string_view module, std::string_view path = {});

// The Outcome a Status produced by KernelError (or any Status) stands for.
Outcome OutcomeOf(const absl::Status& s);

}  // namespace kmodd::kernel

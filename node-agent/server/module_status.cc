#include "node-agent/server/module_status.h"

#include "absl/strings/str_cat.h"
#include "node-agent/kernel/errors.h"

namespace kmodd::agent {

ErrorClass ClassOf(const absl::Status& s) {
  if (absl::IsUnauthenticated(s)) {
    // A registry refusing the pull secret (image layer): fixed by a new Secret or new grants
    // on the registry, neither of which changes the desired state. Retried with backoff.
    return ErrorClass::kRetry;
  }
  switch (kernel::OutcomeOf(s)) {
    case kernel::Outcome::kSuccess:
      return ErrorClass::kNone;
    case kernel::Outcome::kRetry:
    case kernel::Outcome::kUnknown:
      return ErrorClass::kRetry;
    case kernel::Outcome::kWaitForChange:
      return ErrorClass::kWait;
    case kernel::Outcome::kNotPermitted:
    case kernel::Outcome::kSpecError:
      return ErrorClass::kTerminal;
  }
  return ErrorClass::kRetry;
}

bool ModuleStatus::SameAs(const ModuleStatus& o) const {
  return key == o.key && phase == o.phase && message == o.message &&
         error_class == o.error_class && image == o.image && image_digest == o.image_digest &&
         version == o.version && kernel_modules == o.kernel_modules && firmware == o.firmware &&
         pull_bytes_done == o.pull_bytes_done && pull_bytes_total == o.pull_bytes_total &&
         desired_version == o.desired_version && warnings == o.warnings && checks == o.checks;
}

namespace {

DerivedPhase Failed(const absl::Status& s, bool retry_scheduled) {
  std::string message(s.message());
  const ErrorClass c = ClassOf(s);
  if (c == ErrorClass::kTerminal) {
    absl::StrAppend(&message, " (not retried until the desired state changes)");
  } else if (retry_scheduled) {
    absl::StrAppend(&message, " (will retry)");
  }
  return {api::Phase::kFailed, std::move(message), c};
}

}  // namespace

DerivedPhase DerivePhase(const ModuleFacts& f) {
  if (f.acting == ModuleFacts::Acting::kLoad) {
    return {api::Phase::kLoading, "", ErrorClass::kNone};
  }
  if (f.acting == ModuleFacts::Acting::kUnload) {
    return {api::Phase::kUnloading, "", ErrorClass::kNone};
  }
  if (f.desired && f.pulling) {
    return {api::Phase::kPulling, "", ErrorClass::kNone};
  }
  if (f.desired && f.converged) {
    return {api::Phase::kLoaded, "", ErrorClass::kNone};
  }
  if (f.desired && !f.problem.ok()) {
    return Failed(f.problem, f.retry_scheduled);
  }
  if (!f.last_error.ok()) {
    return Failed(f.last_error, f.retry_scheduled);
  }
  if (!f.desired) {
    return {api::Phase::kUnloading, "no longer desired", ErrorClass::kNone};
  }
  if (f.journal != nullptr && f.journal->phase == api::Phase::kLoaded) {
    return {api::Phase::kPending, "drift: reloading", ErrorClass::kNone};
  }
  return {api::Phase::kPending, "", ErrorClass::kNone};
}

}  // namespace kmodd::agent

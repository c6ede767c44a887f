#include "node-agent/kernel/errors.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kmodd::kernel {

namespace {

struct Row {
  KernelOp op;
  int err;
  Outcome outcome;
  const char* meaning;
};

// init_module/finit_module and delete_module, from kernel/module/main.c and the man pages.
constexpr Row kTable[] = {
    {KernelOp::kInsert, EEXIST, Outcome::kSuccess, "already loaded"},
    {KernelOp::kInsert, ENOEXEC, Outcome::kWaitForChange,
     "invalid module format: built for another kernel (vermagic) or not a module; "
     "rebuild the driver image for this kernel"},
    {KernelOp::kInsert, ENOENT, Outcome::kWaitForChange,
     "unknown symbol (a dependency is missing or was built for another kernel), or the "
     "module's init returned ENOENT, e.g. for missing firmware: the kernel log says which"},
    {KernelOp::kInsert, EPERM, Outcome::kNotPermitted,
     "not permitted: the agent lacks CAP_SYS_MODULE, module loading is disabled "
     "(kernel.modules_disabled), or kernel lockdown refuses unsigned modules"},
    {KernelOp::kInsert, EKEYREJECTED, Outcome::kNotPermitted,
     "signature rejected: module signature enforcement is on; sign the module with a key "
     "the kernel trusts"},
    {KernelOp::kInsert, ENOKEY, Outcome::kNotPermitted,
     "no signature key: module signature enforcement is on and the module is unsigned or "
     "signed with an unknown key"},
    {KernelOp::kInsert, EBADMSG, Outcome::kNotPermitted,
     "malformed module signature: re-sign the module"},
    {KernelOp::kInsert, EINVAL, Outcome::kSpecError,
     "invalid argument: a module parameter is unknown or has a bad value (the kernel log "
     "names it), or the module is malformed"},
    {KernelOp::kInsert, EBUSY, Outcome::kRetry, "the module is being loaded or unloaded"},
    {KernelOp::kInsert, EAGAIN, Outcome::kRetry, "temporarily unavailable"},
    {KernelOp::kInsert, EINTR, Outcome::kRetry, "interrupted"},
    {KernelOp::kInsert, ENOMEM, Outcome::kRetry, "out of memory"},
    {KernelOp::kInsert, ENODEV, Outcome::kWaitForChange,
     "the module's init found no device it supports"},
    {KernelOp::kInsert, ENXIO, Outcome::kWaitForChange,
     "the module's init found no device it supports"},
    {KernelOp::kInsert, EFBIG, Outcome::kWaitForChange, "module file too large"},
    {KernelOp::kRemove, ENOENT, Outcome::kSuccess, "not loaded"},
    {KernelOp::kRemove, EWOULDBLOCK, Outcome::kWaitForChange,
     "in use: stop what uses it (see its holders) and it will be removed"},
    {KernelOp::kRemove, EBUSY, Outcome::kRetry, "busy: still initialising, or in use"},
    {KernelOp::kRemove, EINTR, Outcome::kRetry, "interrupted"},
    {KernelOp::kRemove, EPERM, Outcome::kNotPermitted,
     "not permitted: the agent lacks CAP_SYS_MODULE, or the module cannot be unloaded "
     "(no exit function, or built without module unloading)"},
};

absl::StatusCode CodeFor(Outcome o) {
  switch (o) {
    case Outcome::kSuccess:
      return absl::StatusCode::kOk;
    case Outcome::kRetry:
      return absl::StatusCode::kUnavailable;
    case Outcome::kWaitForChange:
      return absl::StatusCode::kFailedPrecondition;
    case Outcome::kNotPermitted:
      return absl::StatusCode::kPermissionDenied;
    case Outcome::kSpecError:
      return absl::StatusCode::kInvalidArgument;
    case Outcome::kUnknown:
      return absl::StatusCode::kUnknown;
  }
  return absl::StatusCode::kUnknown;
}

}  // namespace

Classification Classify(KernelOp op, int err) {
  for (const Row& r : kTable) {
    if (r.op == op && r.err == err) {
      return Classification{r.outcome, CodeFor(r.outcome), r.meaning};
    }
  }
  return Classification{Outcome::kUnknown, CodeFor(Outcome::kUnknown),
                        op == KernelOp::kInsert ? "the module's init failed" : "remove failed"};
}

absl::Status KernelError(KernelOp op, int err, std::string_view module, std::string_view path) {
  const Classification c = Classify(op, err);
  if (c.outcome == Outcome::kSuccess) {
    return absl::OkStatus();
  }
  std::string msg = absl::StrCat(op == KernelOp::kInsert ? "insert " : "remove ",
                                 std::string(module));
  if (!path.empty()) {
    absl::StrAppend(&msg, " (", std::string(path), ")");
  }
  absl::StrAppend(&msg, ": ", std::strerror(err), ": ", c.meaning);
  return absl::Status(c.code, msg);
}

Outcome OutcomeOf(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
      return Outcome::kSuccess;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAborted:
      return Outcome::kRetry;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kNotFound:
      return Outcome::kWaitForChange;
    case absl::StatusCode::kPermissionDenied:
      return Outcome::kNotPermitted;
    case absl::StatusCode::kInvalidArgument:
      return Outcome::kSpecError;
    default:
      return Outcome::kUnknown;
  }
}

}  // namespace kmodd::kernel

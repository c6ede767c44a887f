#include <catch2/catch.hpp>

#include <cerrno>

#include "node-agent/kernel/errors.h"

using kmodd::kernel::Classify;
using kmodd::kernel::KernelError;
using kmodd::kernel::KernelOp;
using kmodd::kernel::Outcome;

TEST_CASE("kernel errors are classified by what the reconciler should do") {
  struct Row {
    KernelOp op;
    int err;
    Outcome want;
  };
  const Row rows[] = {
      {KernelOp::kInsert, EEXIST, Outcome::kSuccess},
      {KernelOp::kInsert, ENOEXEC, Outcome::kWaitForChange},
      {KernelOp::kInsert, ENOENT, Outcome::kWaitForChange},
      {KernelOp::kInsert, EPERM, Outcome::kNotPermitted},
      {KernelOp::kInsert, EKEYREJECTED, Outcome::kNotPermitted},
      {KernelOp::kInsert, ENOKEY, Outcome::kNotPermitted},
      {KernelOp::kInsert, EINVAL, Outcome::kSpecError},
      {KernelOp::kInsert, EBUSY, Outcome::kRetry},
      {KernelOp::kInsert, ENOMEM, Outcome::kRetry},
      {KernelOp::kInsert, ENODEV, Outcome::kWaitForChange},
      {KernelOp::kInsert, EIO, Outcome::kUnknown},
      {KernelOp::kRemove, ENOENT, Outcome::kSuccess},
      {KernelOp::kRemove, EWOULDBLOCK, Outcome::kWaitForChange},
      {KernelOp::kRemove, EBUSY, Outcome::kRetry},
      {KernelOp::kRemove, EPERM, Outcome::kNotPermitted},
      {KernelOp::kRemove, EEXIST, Outcome::kUnknown},
  };
  for (const auto& r : rows) {
    INFO("op " << static_cast<int>(r.op) << " errno " << r.err);
    CHECK(Classify(r.op, r.err).outcome == r.want);
    CHECK(kmodd::kernel::OutcomeOf(KernelError(r.op, r.err, "m")) == r.want);
  }
}

TEST_CASE("a kernel error names the module, the file and what to do") {
  const auto s = KernelError(KernelOp::kInsert, ENOEXEC, "kmm_ci_a", "/opt/lib/modules/6.1/kmm_ci_a.ko");
  CHECK(absl::IsFailedPrecondition(s));
  const std::string msg(s.message());
  CHECK(msg.find("insert kmm_ci_a (/opt/lib/modules/6.1/kmm_ci_a.ko)") != std::string::npos);
  CHECK(msg.find("rebuild the driver image") != std::string::npos);
  CHECK(KernelError(KernelOp::kInsert, EEXIST, "m").ok());
  CHECK(KernelError(KernelOp::kRemove, ENOENT, "m").ok());
}

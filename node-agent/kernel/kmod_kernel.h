#pragma once

// The real Kernel: libkmod for inserting and removing, procfs/sysfs for observing.

#include <memory>
#include <mutex>
#include <string>

#include "node-agent/kernel/kernel.h"
#include "node-agent/kernel/kmod_handles.h"
#include "node-agent/kernel/procfs.h"

namespace kmodd::kernel {

class KmodKernel : public Kernel {
 public:
  struct Options {
    ProcRoots roots;
    // The running kernel's module tree; empty means /lib/modules/<release>.
    std::string host_modules_dir;
  };

  explicit KmodKernel(Options options);

  absl::StatusOr<KernelState> Observe() override;
  absl::Status InsertFile(const std::string& path, const std::string& params) override;
  absl::Status InsertHost(const std::string& name, const std::string& params) override;
  absl::Status Remove(const std::string& name) override;
  absl::StatusOr<std::optional<std::string>> HostModulePath(const std::string& name) override;

  // Read from one of the running kernel's own module files.
  absl::StatusOr<std::string> RunningVermagic() override;

 private:
  absl::StatusOr<kmod_ctx*> HostCtx();

  Options options_;
  std::mutex mu_;  // libkmod contexts are not thread-safe
  KmodCtx host_ctx_;
  std::string vermagic_;
};

}  // namespace kmodd::kernel

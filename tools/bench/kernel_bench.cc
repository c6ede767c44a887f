// kernel_bench: the cost of the agent's kernel layer alone, in one process: KmodKernel's
// InsertFile + Remove of one module file, against the bare finit_module + delete_module
// syscalls on the same file, alternating. Run in the real-kernel rig's guest by
// tools/bench/agent_vs_modprobe; needs CAP_SYS_MODULE.
//
// usage: kernel_bench [--rounds N] MODULE.ko
//   Prints one line per operation: "kmodd-insert US", "kmodd-remove US",
//   "syscall-insert US", "syscall-remove US" (CLOCK_MONOTONIC microseconds).

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>

#include "common/flags.h"
#include "node-agent/kernel/kmod_kernel.h"
#include "node-agent/kernel/tree.h"

namespace {

using Clock = std::chrono::steady_clock;

long long Micros(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::microseconds>(b - a).count();
}

int SyscallInsert(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return -errno;
  }
  const long r = syscall(SYS_finit_module, fd, "", 0);
  const int err = r < 0 ? -errno : 0;
  close(fd);
  return err;
}

int SyscallRemove(const std::string& name) {
  return syscall(SYS_delete_module, name.c_str(), O_NONBLOCK) < 0 ? -errno : 0;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 20;
  std::string path;
  kmodd::flags::FlagSet flags("kernel_bench", "usage: kernel_bench [--rounds N] MODULE.ko\n");
  flags.Int("--rounds", "N", "insert/remove rounds of each kind (default 20)", &rounds, {1});
  flags.Positional("MODULE.ko", "the module file", &path).Needs("a module file (MODULE.ko)");
  if (std::optional<int> exit =
          flags.ParseOrExit(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr)) {
    return *exit;
  }
  auto info = kmodd::kernel::ReadModuleFile(path);
  if (!info.ok()) {
    std::fprintf(stderr, "kernel_bench: %s\n", std::string(info.status().message()).c_str());
    return 1;
  }
  const std::string name = info->name;
  kmodd::kernel::KmodKernel kernel(kmodd::kernel::KmodKernel::Options{});
  for (int r = 0; r < rounds; ++r) {
    auto t0 = Clock::now();
    if (auto s = kernel.InsertFile(path, ""); !s.ok()) {
      std::fprintf(stderr, "kernel_bench: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    auto t1 = Clock::now();
    if (auto s = kernel.Remove(name); !s.ok()) {
      std::fprintf(stderr, "kernel_bench: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    auto t2 = Clock::now();
    std::printf("kmodd-insert %lld\nkmodd-remove %lld\n", Micros(t0, t1), Micros(t1, t2));

    t0 = Clock::now();
    if (int err = SyscallInsert(path); err < 0) {
      std::fprintf(stderr, "kernel_bench: finit_module %s: %s\n", path.c_str(), std::strerror(-err));
      return 1;
    }
    t1 = Clock::now();
    if (int err = SyscallRemove(name); err < 0) {
      std::fprintf(stderr, "kernel_bench: delete_module %s: %s\n", name.c_str(), std::strerror(-err));
      return 1;
    }
    t2 = Clock::now();
    std::printf("syscall-insert %lld\nsyscall-remove %lld\n", Micros(t0, t1), Micros(t1, t2));
  }
  return 0;
}

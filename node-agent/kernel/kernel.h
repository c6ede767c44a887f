#pragma once

// The agent's view of the running kernel, and the only way it changes it. One real
// implementation (libkmod + sysfs, kmod_kernel.h) and one fake for the reconcile logic's
// tests (tests/node-agent/fake_kernel.h). Every method may block (module init can take
// seconds): callers run them off the event loop.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kmodd::kernel {

// A module the kernel has loaded (/proc/modules and /sys/module/<name>).
struct LoadedModule {
  enum class State { kLive, kComing, kGoing };
  std::string name;
  State state = State::kLive;
  int refcount = 0;
  std::vector<std::string> holders;  // modules that use this one (sorted)
  std::string version;               // MODULE_VERSION, may be empty
  std::string srcversion;
  std::string taint;                 // per-module taint letters, e.g. "OE" (O = out of tree)
  std::map<std::string, std::string> parameters;  // readable parameters

  bool OutOfTree() const { return taint.find('O') != std::string::npos; }
  bool InUse() const { return refcount > 0 || !holders.empty(); }
  bool operator==(const LoadedModule&) const = default;
};

struct KernelState {
  std::string release;   // uname -r
  std::string boot_id;   // /proc/sys/kernel/random/boot_id
  uint64_t taint = 0;    // /proc/sys/kernel/tainted
  std::vector<LoadedModule> modules;  // sorted by name

  const LoadedModule* Find(const std::string& name) const;
};

// Module names as the kernel compares them: '-' and '_' are the same.
std::string CanonicalModuleName(std::string_view name);

class Kernel {
 public:
  virtual ~Kernel() = default;

  // The whole state. A read that fails is an error, never an empty list: an empty list
  // that means "could not read" would unload or reload a whole node.
  [[nodiscard]] virtual absl::StatusOr<KernelState> Observe() = 0;

  // Inserts one module file with its parameters ("a=1 b=x"); its dependencies must already
  // be loaded (the caller orders). Already loaded is success.
  [[nodiscard]] virtual absl::Status InsertFile(const std::string& path,
                                                const std::string& params) = 0;

  // Loads an in-tree module of the running kernel by name from the host tree
  // (/lib/modules/<release>), with its dependencies. Already loaded is success.
  [[nodiscard]] virtual absl::Status InsertHost(const std::string& name,
                                                const std::string& params) = 0;

  // Unloads one module. Never forced: a module in use fails with FailedPrecondition naming
  // its holders. Not loaded is success.
  [[nodiscard]] virtual absl::Status Remove(const std::string& name) = 0;

  // Whether `name` is a module of the running kernel's own tree (/lib/modules/<release>),
  // and its path there.
  [[nodiscard]] virtual absl::StatusOr<std::optional<std::string>> HostModulePath(
      const std::string& name) = 0;

  // The vermagic string the running kernel expects of modules.
  [[nodiscard]] virtual absl::StatusOr<std::string> RunningVermagic() = 0;
};

}  // namespace kmodd::kernel

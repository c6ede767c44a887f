#pragma once

// Shared by the server tests: a thread-safe FakeKernel (the reconciler runs on its own
// thread), driver trees of fake .ko files, module specs, temp dirs, a polling wait, and the
// parts a reconciler is wired with.

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../fake_kernel.h"
#include "api/node_modules_config.h"
#include "common/log.h"
#include "fake_ko.h"
#include "node-agent/server/agent_state.h"
#include "node-agent/server/metrics.h"
#include "node-agent/server/reconciler.h"
#include "tests/fakes/fake_clock.h"
#include "tests/temp_dir.h"

namespace kmodd::testing {

// The FakeKernel behind a mutex: the reconciler's worker and the test both touch it.
class LockedKernel : public kernel::Kernel {
 public:
  absl::StatusOr<kernel::KernelState> Observe() override {
    std::lock_guard<std::mutex> l(mu_);
    return k_.Observe();
  }
  absl::Status InsertFile(const std::string& path, const std::string& params) override {
    std::lock_guard<std::mutex> l(mu_);
    return k_.InsertFile(path, params);
  }
  absl::Status InsertHost(const std::string& name, const std::string& params) override {
    std::lock_guard<std::mutex> l(mu_);
    return k_.InsertHost(name, params);
  }
  absl::Status Remove(const std::string& name) override {
    std::lock_guard<std::mutex> l(mu_);
    return k_.Remove(name);
  }
  absl::StatusOr<std::optional<std::string>> HostModulePath(const std::string& name) override {
    std::lock_guard<std::mutex> l(mu_);
    return k_.HostModulePath(name);
  }
  absl::StatusOr<std::string> RunningVermagic() override {
    std::lock_guard<std::mutex> l(mu_);
    return k_.RunningVermagic();
  }
  template <class F>
  auto With(F f) {
    std::lock_guard<std::mutex> l(mu_);
    return f(k_);
  }

 private:
  std::mutex mu_;
  FakeKernel k_;
};

// <root>/opt/lib/modules/6.1.0-test/<name>.ko for each name, built for FakeKernel's kernel.
inline std::string MakeDriverImage(const std::string& root, const std::vector<std::string>& names) {
  const std::string dir = root + "/opt/lib/modules/6.1.0-test";
  std::filesystem::create_directories(dir);
  for (const auto& n : names) {
    WriteFakeKo(dir + "/" + n + ".ko",
                {"vermagic=6.1.0-test SMP mod_unload modversions ", "depends=", "name=" + n});
  }
  return root;
}

inline api::NodeModuleSpec Spec(const std::string& ns, const std::string& name,
                                const std::string& image, const std::string& module) {
  api::NodeModuleSpec s;
  s.namespace_ = ns;
  s.name = name;
  s.config.kernel_version = "6.1.0-test";
  s.config.container_image = image;
  s.config.modprobe.module_name = module;
  return s;
}

inline const agent::ModuleStatus* FindStatus(const agent::AgentSnapshot& s,
                                              const std::string& key) {
  for (const auto& m : s.modules) {
    if (m.key == key) {
      return &m;
    }
  }
  return nullptr;
}

inline bool PhaseIs(const agent::AgentState& state, const std::string& key,
                    api::Phase phase) {
  const agent::AgentSnapshot s = state.Snapshot();
  const agent::ModuleStatus* m = FindStatus(s, key);
  return m != nullptr && m->phase == phase;
}

// The parts a reconciler is wired with in tests: a temp dir, a clock, the kernel, firmware,
// the agent's state and metrics, and a log that goes nowhere. A rig that derives from it
// destroys its reconciler (a member of its own) before these.
template <class ClockT = FakeClock, class KernelT = LockedKernel>
struct AgentParts {
  TempDir dir{"server"};
  ClockT clock;
  KernelT kernel;
  FakeFirmware firmware;
  agent::AgentState state{clock};
  agent::Metrics metrics;
  std::FILE* devnull = std::fopen("/dev/null", "w");
  Logger log{devnull};

  AgentParts() = default;
  AgentParts(const AgentParts&) = delete;
  AgentParts& operator=(const AgentParts&) = delete;
  ~AgentParts() { std::fclose(devnull); }

  agent::ReconcilerOptions Options() const {
    agent::ReconcilerOptions o;
    o.journal_path = dir.path + "/journal.json";
    return o;
  }
  bool Loaded(const std::string& module) {
    return kernel.With([&](FakeKernel& k) { return k.IsLoaded(module); });
  }
};

}  // namespace kmodd::testing

#pragma once

// Readiness (issue 15, item 1): once a Module's kernel modules are loaded, the agent runs
// the Module's checks (api/readiness.h) and reports the Module Available while they run,
// Loaded (Ready) once all passed, or Failed naming the first check that failed and what it
// saw. The checks only read what the kernel exposes: a sysfs/procfs file, udev's device
// list, the kernel log. Nothing from the driver image is run.
//
// Two layers, as elsewhere in the agent:
//  - StepCheck and Verdict: pure (no clock, no I/O; time and observations are inputs),
//    table-tested;
//  - Readiness: keeps one run of checks per loaded Module, observes on its own thread
//    (every 250 ms while a check waits, and at once on a device uevent), and lays the
//    verdicts over the reconciler's status rows before they reach AgentState.
//
// A run starts when the Module is seen Loaded, and starts again after it is seen Loading
// (a reload) or when its checks change. A kernelLog check reads the log from the moment the
// Module was seen Loading, so it covers the load itself; for a Module already loaded when
// the agent started it reads from the start of the run. A Ready Module stays Ready until it
// is loaded again: the checks gate readiness, they are not a liveness probe.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/readiness.h"
#include "common/clock.h"
#include "common/log.h"
#include "node-agent/kernel/kmsg.h"
#include "node-agent/server/agent_state.h"
#include "node-agent/server/module_status.h"

namespace kmodd::agent {

enum class CheckState { kWaiting, kPassed, kFailed };
const char* CheckStateName(CheckState s);  // Waiting, Passed, Failed

// What the agent saw for one check at one moment.
struct CheckObservation {
  bool exists = false;           // path, stable: the file exists
  std::string content;           // path, stable: its first 4 KiB (when read)
  std::string refused;           // path, stable: why it was not read (resolves elsewhere)
  std::vector<std::string> devices;  // devices: the matching device nodes
  std::string error;             // the observation failed (udev, the kernel log)
  std::optional<std::string> log_match;  // kernelLog: the first matching line of the run
};

// One check's progress in one run.
struct CheckProgress {
  CheckState state = CheckState::kWaiting;
  std::string message;  // what was seen, for the status
  // stable: the value last seen and since when (ms since the run started)
  std::optional<std::string> value;
  int64_t value_since_ms = 0;
};

// Advances `p` with what was seen `elapsed_ms` after the run started. Passed and Failed
// are final.
void StepCheck(const api::ReadinessCheck& c, int64_t elapsed_ms, const CheckObservation& o,
               CheckProgress& p);

// The Module's phase from its checks: Failed with the first failed check, else Loaded when
// all passed, else Available naming the first that waits.
struct ReadinessVerdict {
  api::Phase phase = api::Phase::kAvailable;
  std::string message;
  bool operator==(const ReadinessVerdict&) const = default;
};
ReadinessVerdict Verdict(const std::vector<api::ReadinessCheck>& checks,
                         const std::vector<CheckProgress>& progress);

// What Readiness needs of each status row's Module.
struct ReadinessInput {
  std::vector<api::ReadinessCheck> checks;
  std::string identity;  // changes when what is loaded changes (image digest, version)
};

class Readiness {
 public:
  Readiness(AgentState& state, Logger& log, const Clock& clock);
  ~Readiness();
  Readiness(const Readiness&) = delete;
  Readiness& operator=(const Readiness&) = delete;

  void Start();
  void Stop();

  // The reconciler's rows (ProjectStatus) with the checks of their Modules: starts, keeps
  // or ends runs, lays the verdicts over the Loaded rows and hands them to AgentState.
  void Publish(std::vector<ModuleStatus> rows, const std::map<std::string, ReadinessInput>& in);

  // A device uevent: device checks look at udev's list again now.
  void DevicesChanged();
  // Without device uevents: device checks read udev's list at every look (each 250 ms).
  void PollDevices();

 private:
  struct Run {
    std::vector<api::ReadinessCheck> checks;
    std::string identity;
    Clock::Monotonic started;
    std::vector<CheckProgress> progress;
    std::optional<kernel::KmsgReader> kmsg;
    std::string kmsg_error;
    std::optional<std::string> log_match;
    ReadinessVerdict verdict;
    bool logged = false;  // the verdict's end was logged
  };

  void Worker();
  // Observes and steps every waiting run; true if a verdict changed.
  bool EvaluateLocked();
  void ApplyLocked();
  CheckObservation ObserveLocked(const api::ReadinessCheck& c, Run& run);

  AgentState& state_;
  Logger& log_;
  const Clock& clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool wake_ = false;
  bool devices_dirty_ = true;
  bool poll_devices_ = false;
  std::vector<std::string> device_nodes_;
  std::string device_error_;
  std::vector<ModuleStatus> rows_;  // the reconciler's, as last given
  std::map<std::string, Run> runs_;
  // Opened when a Module with a kernelLog check was seen Loading: its run reads from there.
  std::map<std::string, std::optional<kernel::KmsgReader>> loading_;
  std::thread worker_;
};

}  // namespace kmodd::agent

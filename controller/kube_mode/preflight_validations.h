#pragma once

// Kubernetes mode: KMM's PreflightValidation (kmm.sigs.x-k8s.io/v1beta2, cluster-scoped,
// short name pfv). For each object, every Module in the cluster is checked against
// spec.kernelVersion as `kmodd-controller preflight` checks it (controller/preflight), with
// the Module's imageRepoSecret, and status.modules[] is written: one entry per Module with
// verificationStatus (InProgress while it runs, then Success or Failure), verificationStage,
// statusReason and lastTransitionTime. A generation is checked once; editing the spec (or
// recreating the object) checks again. Only the leader writes.
//
// spec.pushBuiltImage is read and has no effect: kmodd builds no images yet, and a Module
// whose image is missing fails at once (KMM waits for its build, or for ever without one).

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/http/cancel.h"
#include "common/log.h"
#include "common/value.h"
#include "controller/kube/client.h"
#include "controller/preflight/preflight.h"

namespace kmodd::source {

inline constexpr char kPreflightGroupVersion[] = "kmm.sigs.x-k8s.io/v1beta2";

// What a PreflightValidation asks. The object is API input: every field is checked.
struct PreflightRequest {
  std::string name;
  int64_t generation = 0;
  std::string kernel;
  bool push_built_image = false;
};

// InvalidArgument naming the field for an object kmodd cannot act on (no name, no
// spec.kernelVersion, a kernelVersion that is not a plausible `uname -r`).
[[nodiscard]] absl::StatusOr<PreflightRequest> ParsePreflightValidation(const Value& object);

// The status to write: one entry per result, sorted by namespace and name, in KMM's terms
// (verificationStage Image or Done; kmodd's own stage begins statusReason); an entry whose
// verdict (status, stage, reason) is what `previous` (the object's status) has keeps its
// lastTransitionTime, otherwise it gets `now`.
Value PreflightStatus(const std::vector<preflight::Result>& results, const Value* previous,
                      const std::string& now, bool in_progress);

// Every Module in the cluster checked for base.kernel (the other options as given), each with
// the Secret its imageRepoSecret names; a Module that does not validate, or whose Secret
// cannot be read, is a Failure saying why. `on_listed` (may be empty) sees the Modules
// before any is checked. An error only when the Modules cannot be listed.
[[nodiscard]] absl::StatusOr<std::vector<preflight::Result>> PreflightClusterModules(
    kube::KubeClient& client, const preflight::Options& base,
    const std::function<void(const std::vector<preflight::Result>&)>& on_listed = {});

class PreflightValidations {
 public:
  PreflightValidations(kube::KubeClient& client, const Clock& clock, Logger& log,
                       std::function<bool()> is_leader, std::string ca_file = "");
  ~PreflightValidations();
  void Start();
  void Stop();

 private:
  void Watch();
  void Work();
  void Check(const PreflightRequest& req);

  kube::KubeClient& client_;
  const Clock& clock_;
  Logger& log_;
  std::function<bool()> is_leader_;
  std::string ca_file_;
  http::Cancellation stop_;
  std::thread watch_;
  std::thread work_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<PreflightRequest> queue_;
  std::map<std::string, int64_t> done_;  // by name: the generation checked (or being checked) last
};

}  // namespace kmodd::source

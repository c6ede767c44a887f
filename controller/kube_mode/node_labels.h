#pragma once

// The Node labels and Node Events of Kubernetes mode, as pieces NodeLabeler calls:
//   - WriteNodeLabels: one merge patch per Node; when the API server refuses it as invalid
//     (422: it refuses a whole patch for one bad label), the labels one at a time, so that
//     a label it refuses holds back no other (a module's .ready least of all).
//   - RefusedLabels: a refused label stays out of what is asked for, is retried every
//     kRetry and not on every pass, and is reported once.
//   - KMM's Node Events: ModuleLoaded / ModuleUnloaded when a .ready label is added /
//     removed, with KMM's messages and its `module` annotation (tools filter on it).

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/value.h"
#include "controller/kube/client.h"

namespace kmodd::server {

inline constexpr char kLabelPrefix[] = "kmm.node.kubernetes.io/";

using Labels = std::map<std::string, std::string>;

struct LabelWrite {
  // A failure that is not a refusal (unavailable, conflict...): the caller retries it all.
  absl::Status error;
  std::map<std::string, std::string> refused;  // label key -> the API server's reason
};

// Merge-patches `patch` (LabelPatch's shape: metadata.labels only) onto Node `node`.
[[nodiscard]] LabelWrite WriteNodeLabels(kube::KubeClient& client, const std::string& node,
                                         const Value& patch);

// `before` with `patch`'s labels applied (null removes), less the `refused` ones.
Labels PatchedLabels(const Labels& before, const Value& patch,
                     const std::map<std::string, std::string>& refused);

// Labels the API server refused, by node.
class RefusedLabels {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kRetry{30};

  // Leaves out of `desired` what was refused on `node` with the same value less than kRetry
  // ago. Forgets refusals of labels now wanted with another value, or not at all.
  void Filter(const std::string& node, Labels& desired, Clock::time_point now);
  // Records a refusal; true when it is news (not refused before with this value).
  bool Refused(const std::string& node, const std::string& key, const std::string& value,
               Clock::time_point now);
  // Forgets the refusals of labels that were written after all.
  void Accepted(const std::string& node, const Labels& written);
  // How long until the first refusal on `node` may be asked again; nullopt when none.
  std::optional<Clock::duration> RetryIn(const std::string& node, Clock::time_point now) const;
  void Clear() { by_node_.clear(); }

 private:
  struct Refusal {
    std::string value;
    Clock::time_point at;
  };
  std::map<std::string, std::map<std::string, Refusal>> by_node_;
};

struct NodeEvent {
  std::string type;  // kube::kEventNormal, kEventWarning
  std::string reason;
  std::string message;
  std::map<std::string, std::string> annotations;
};

// "<namespace>/<name>" for a Module's .ready or .version.ready label; "" for other labels.
std::string ModuleOfLabel(const std::string& key);

// The Events KMM writes for the .ready labels that went from `before` to `after`:
// ModuleLoaded "Module <ns>/<name> loaded into the kernel", ModuleUnloaded "... unloaded
// from the kernel", both Normal with the annotation module=<ns>/<name>.
std::vector<NodeEvent> ReadyLabelEvents(const Labels& before, const Labels& after);

// kmodd's Warning Event for a label the API server refused.
NodeEvent LabelRefusedEvent(const std::string& key, const std::string& value,
                            const std::string& error);

}  // namespace kmodd::server

#pragma once

// core/v1 Events about objects kmodd manages, as `kubectl describe` shows them.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "controller/kube/client.h"
#include "common/clock.h"

namespace kmodd::kube {

struct ObjectReference {
  std::string api_version;  // "kmm.sigs.x-k8s.io/v1beta1", "v1"
  std::string kind;
  std::string ns;  // empty for cluster-scoped objects (Nodes): their events go to "default"
  std::string name;
  std::string uid;
};

inline constexpr char kEventNormal[] = "Normal";
inline constexpr char kEventWarning[] = "Warning";

class EventRecorder {
 public:
  // `component` is the Event's source.component and reportingComponent; `instance` its
  // reportingInstance (the pod or host name).
  EventRecorder(KubeClient& client, const Clock& clock, std::string component,
                std::string instance);

  // Creates an Event about `object`, with `annotations` on it (KMM's Node Events carry
  // module=<ns>/<name>). The same (object, type, reason, message, annotations) again raises
  // the count and lastTimestamp of the Event already made, instead of adding one; if that
  // Event has expired meanwhile, a new one is made. Thread-safe.
  [[nodiscard]] absl::Status Record(const ObjectReference& object, std::string_view type,
                                    std::string_view reason, std::string_view message,
                                    const std::map<std::string, std::string>& annotations = {});

  static constexpr size_t kMaxMessage = 1024;
  static constexpr size_t kMaxRemembered = 4096;

 private:
  struct Made {
    std::string path;
    int64_t count = 0;
  };
  absl::Status CreateNew(const ObjectReference& object, std::string_view type,
                         std::string_view reason, const std::string& message,
                         const std::map<std::string, std::string>& annotations,
                         const std::string& key);

  KubeClient& client_;
  const Clock& clock_;
  const std::string component_;
  const std::string instance_;
  std::mutex mu_;
  std::map<std::string, Made> made_;  // by object, type, reason and message
  uint64_t sequence_ = 0;
};

}  // namespace kmodd::kube

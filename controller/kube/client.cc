#include "controller/kube/client.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/json.h"

namespace kmodd::kube {

std::string ResourcePath(std::string_view group_version, std::string_view resource,
                         std::string_view ns, std::string_view name) {
  const bool core = group_version == "v1";
  std::string path = absl::StrCat(core ? "/api/" : "/apis/", std::string(group_version));
  if (!ns.empty()) {
    absl::StrAppend(&path, "/namespaces/", std::string(ns));
  }
  absl::StrAppend(&path, "/", std::string(resource));
  if (!name.empty()) {
    absl::StrAppend(&path, "/", std::string(name));
  }
  return path;
}

absl::StatusOr<Value> UpdateStatus(KubeClient& client, std::string_view path,
                                   const Value& status) {
  Value patch;
  patch.Set("status", status);
  return client.MergePatch(absl::StrCat(std::string(path), "/status"), patch);
}

absl::Status RetryOnConflict(const std::function<absl::Status()>& attempt, int attempts) {
  absl::Status status;
  for (int i = 0; i < attempts; ++i) {
    if (i > 0) {
      // client-go waits 10 ms between tries: enough for the other writer to finish.
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    status = attempt();
    if (status.code() != absl::StatusCode::kAborted) {
      return status;
    }
  }
  return status;
}

}  // namespace kmodd::kube

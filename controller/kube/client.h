#pragma once

// The Kubernetes API as kmodd uses it: a handful of REST verbs on API paths, objects as
// Values. One real implementation (rest_client.h, on common/http) and one in-memory fake
// (fake_client.h) for other units' tests.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/http/cancel.h"
#include "common/value.h"

namespace kmodd::kube {

// Paths: "/api/v1/namespaces/default/configmaps" (a collection), ".../configmaps/name" (an
// object). `group_version` is "v1" for the core group, else "coordination.k8s.io/v1".
// An empty `ns` makes a cluster-scoped (or all-namespaces) path; an empty `name` a
// collection.
std::string ResourcePath(std::string_view group_version, std::string_view resource,
                         std::string_view ns = "", std::string_view name = "");

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 0;  // 0: everything in one response
  std::string continue_token;
};

struct ObjectList {
  std::vector<Value> items;
  std::string resource_version;  // of the list: where a watch starts
  std::string continue_token;    // non-empty: more pages
};

enum class EventType { kAdded, kModified, kDeleted, kBookmark };

struct WatchEvent {
  EventType type = EventType::kAdded;
  Value object;  // for a bookmark, only apiVersion, kind and metadata.resourceVersion
};

struct WatchOptions {
  std::string resource_version;
  std::string label_selector;
  std::string field_selector;
  // timeoutSeconds: the server ends the stream after this long, cleanly.
  std::chrono::seconds timeout{300};
  http::Cancellation* cancel = nullptr;  // not owned
};

using WatchHandler = std::function<absl::Status(const WatchEvent& event)>;

struct ApplyOptions {
  std::string field_manager;  // required
  bool force = false;         // take ownership of fields other managers own
};

// Errors map the API server's answer by what the caller should do:
//   404                       NotFound
//   409 reason AlreadyExists  AlreadyExists (Create of an existing name)
//   409 other (Conflict)      Aborted: the resourceVersion was stale; re-read and retry
//   410, or ERROR event 410   OutOfRange: the resourceVersion is too old to watch; relist
//   400, 422                  InvalidArgument
//   401 / 403                 Unauthenticated / PermissionDenied
//   429, 5xx, lost transport  Unavailable
// Messages carry the verb, the path and the server's own message.
class KubeClient {
 public:
  virtual ~KubeClient() = default;

  [[nodiscard]] virtual absl::StatusOr<Value> Get(std::string_view path) = 0;
  [[nodiscard]] virtual absl::StatusOr<ObjectList> List(std::string_view path,
                                                        const ListOptions& options) = 0;
  // Streams changes after options.resource_version (with bookmarks) to `handler` until the
  // server ends the stream (OK), the handler fails (its error), options.cancel fires
  // (Cancelled), or an error as above.
  [[nodiscard]] virtual absl::Status Watch(std::string_view path, const WatchOptions& options,
                                           const WatchHandler& handler) = 0;
  // POST to a collection.
  [[nodiscard]] virtual absl::StatusOr<Value> Create(std::string_view collection,
                                                     const Value& object) = 0;
  // PUT: with metadata.resourceVersion set, only over that version (else Aborted).
  [[nodiscard]] virtual absl::StatusOr<Value> Update(std::string_view path,
                                                     const Value& object) = 0;
  // PATCH application/merge-patch+json (RFC 7386).
  [[nodiscard]] virtual absl::StatusOr<Value> MergePatch(std::string_view path,
                                                         const Value& patch) = 0;
  // PATCH application/apply-patch+yaml: server-side apply of `object` as options.field_manager.
  [[nodiscard]] virtual absl::StatusOr<Value> Apply(std::string_view path, const Value& object,
                                                    const ApplyOptions& options) = 0;
  [[nodiscard]] virtual absl::Status Delete(std::string_view path) = 0;
};

// Merge-patches the status subresource: `path` + "/status" with {"status": status}.
[[nodiscard]] absl::StatusOr<Value> UpdateStatus(KubeClient& client, std::string_view path,
                                                 const Value& status);

// Runs `attempt` (a read-modify-write) again while it fails with Aborted (409 Conflict),
// at most `attempts` times in all, the way client-go's RetryOnConflict does. Each attempt
// must re-read the object itself.
[[nodiscard]] absl::Status RetryOnConflict(const std::function<absl::Status()>& attempt,
                                           int attempts = 5);

}  // namespace kmodd::kube

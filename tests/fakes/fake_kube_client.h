#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "controller/kube/client.h"

namespace kmodd::kube {

// An in-memory API server for other units' tests: objects by path, one resourceVersion
// counter, optimistic concurrency (Aborted on a stale resourceVersion), merge patch, a
// change log that Watch replays. A collection without a namespace lists and watches that
// resource in every namespace, as the API server does. Apply merges like a merge patch:
// there is no field ownership here. Assert on the final state (Objects(), Get), not on
// calls.
class FakeKubeClient final : public KubeClient {
 public:
  absl::StatusOr<Value> Get(std::string_view path) override;
  absl::StatusOr<ObjectList> List(std::string_view path, const ListOptions& options) override;
  // Replays the changes after options.resource_version, then waits for more until the
  // timeout or the cancel. OutOfRange when that version was compacted away.
  absl::Status Watch(std::string_view path, const WatchOptions& options,
                     const WatchHandler& handler) override;
  absl::StatusOr<Value> Create(std::string_view collection, const Value& object) override;
  absl::StatusOr<Value> Update(std::string_view path, const Value& object) override;
  absl::StatusOr<Value> MergePatch(std::string_view path, const Value& patch) override;
  absl::StatusOr<Value> Apply(std::string_view path, const Value& object,
                              const ApplyOptions& options) override;
  absl::Status Delete(std::string_view path) override;

  // The next call of any verb fails with `error` (queued, in order).
  void FailNext(absl::Status error);
  // Forgets the change log: running watches, and new ones from older versions, end with
  // OutOfRange (410 Gone), as etcd compaction does to watchers that fell behind.
  void Compact();
  // Every object in `collection`, by name.
  std::map<std::string, Value> Objects(std::string_view collection) const;
  // Calls made, as "VERB path": for tests that must know a write was attempted.
  std::vector<std::string> calls() const;

 private:
  struct Change {
    int64_t rv;
    std::string collection;
    EventType type;
    Value object;
  };
  absl::Status TakeFailure(std::string call);
  absl::StatusOr<Value> Store(const std::string& path, Value object, EventType type);
  absl::StatusOr<Value> Write(std::string_view path, const Value& patch, bool merge);

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, Value> objects_;  // by path
  std::vector<Change> log_;
  int64_t rv_ = 100;
  int64_t compacted_ = 0;  // changes at or before this are gone
  int64_t epoch_ = 0;      // Compact() calls so far
  std::deque<absl::Status> failures_;
  std::vector<std::string> calls_;
  int64_t uid_ = 0;
};

}  // namespace kmodd::kube

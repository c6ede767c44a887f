#pragma once

// The informer loop: list, then watch from the list's resourceVersion, for as long as the
// caller wants. A watch that ends is resumed from the last resourceVersion seen (an event's
// or a bookmark's); one whose version is too old (410 Gone, as an HTTP status or an ERROR
// event) is replaced by a fresh list. Errors wait a capped, jittered, growing backoff.

#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/clock.h"
#include "common/http/cancel.h"
#include "controller/kube/client.h"

namespace kmodd::kube {

struct ListWatchOptions {
  std::string path;  // the collection, e.g. ResourcePath("v1", "nodes")
  std::string label_selector;
  std::string field_selector;
  int64_t page_size = 500;
  // Each watch asks the server to end it after this, stretched by a random 0-100% so that
  // many watchers do not all come back at once (client-go: 5 minutes).
  std::chrono::seconds watch_timeout{300};
  // Backoff after an error: doubles from initial up to max, each wait drawn from
  // [d/2, d]; back to initial after a watch that delivered something.
  std::chrono::milliseconds initial_backoff{800};
  std::chrono::milliseconds max_backoff{30000};
  // A watch that ends cleanly this soon without an event counts as an error (a server that
  // closes at once would otherwise be hammered).
  std::chrono::milliseconds min_watch_duration{1000};
  uint32_t seed = 0;  // 0: from std::random_device
};

struct ListWatchCallbacks {
  // After every (re)list, the whole collection as it is now: objects missing from it are
  // gone (deleted while no watch was running). Required.
  std::function<void(const std::vector<Value>& objects)> on_sync;
  // Each change seen by the watch (never bookmarks). Required.
  std::function<void(EventType type, const Value& object)> on_event;
  // Each error before it is retried, for the caller to log or count; OutOfRange (410 Gone)
  // means a fresh list follows at once, without a backoff. Optional.
  std::function<void(const absl::Status& error)> on_error;
};

class ListWatch {
 public:
  // Backoffs and the min_watch_duration check are on `clock`.
  ListWatch(KubeClient& client, ListWatchOptions options, ListWatchCallbacks callbacks,
            const Clock& clock);

  // Lists and watches until `stop` is cancelled. Callbacks run on this thread.
  void Run(http::Cancellation& stop);

 private:
  // Every page of the collection; on_sync with them. Returns the list's resourceVersion.
  absl::StatusOr<std::string> ListAll();
  // One watch from rv_; OK when it ended cleanly.
  absl::Status WatchOnce(http::Cancellation& stop, bool& delivered);
  std::chrono::milliseconds NextBackoff();

  KubeClient& client_;
  const ListWatchOptions options_;
  const ListWatchCallbacks callbacks_;
  const Clock& clock_;
  std::mt19937 random_;
  std::chrono::milliseconds backoff_;
  std::string rv_;
};

}  // namespace kmodd::kube

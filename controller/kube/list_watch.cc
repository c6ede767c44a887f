#include "controller/kube/list_watch.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/json.h"

namespace kmodd::kube {

ListWatch::ListWatch(KubeClient& client, ListWatchOptions options, ListWatchCallbacks callbacks,
                     const Clock& clock)
    : client_(client),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)),
      clock_(clock),
      random_(options_.seed != 0 ? options_.seed : std::random_device{}()),
      backoff_(options_.initial_backoff) {}

std::chrono::milliseconds ListWatch::NextBackoff() {
  const std::chrono::milliseconds d = backoff_;
  backoff_ = std::min(backoff_ * 2, options_.max_backoff);
  std::uniform_int_distribution<int64_t> half(d.count() / 2, d.count());
  return std::chrono::milliseconds(half(random_));
}

absl::StatusOr<std::string> ListWatch::ListAll() {
  ListOptions list;
  list.label_selector = options_.label_selector;
  list.field_selector = options_.field_selector;
  list.limit = options_.page_size;
  std::vector<Value> objects;
  std::string rv;
  while (true) {
    absl::StatusOr<ObjectList> page = client_.List(options_.path, list);
    if (!page.ok() && page.status().code() == absl::StatusCode::kOutOfRange &&
        !list.continue_token.empty()) {
      // The continue token expired between pages: start over in one piece.
      list.limit = 0;
      list.continue_token.clear();
      objects.clear();
      continue;
    }
    if (!page.ok()) {
      return page.status();
    }
    for (Value& item : page->items) {
      objects.push_back(std::move(item));
    }
    // Every page of one list is one snapshot; the last page's version is where to watch.
    rv = page->resource_version;
    if (page->continue_token.empty()) {
      break;
    }
    list.continue_token = page->continue_token;
  }
  callbacks_.on_sync(objects);
  return rv;
}

absl::Status ListWatch::WatchOnce(http::Cancellation& stop, bool& delivered) {
  WatchOptions watch;
  watch.resource_version = rv_;
  watch.label_selector = options_.label_selector;
  watch.field_selector = options_.field_selector;
  std::uniform_int_distribution<int64_t> stretch(0, options_.watch_timeout.count());
  watch.timeout = options_.watch_timeout + std::chrono::seconds(stretch(random_));
  watch.cancel = &stop;
  const Clock::Monotonic start = clock_.MonotonicNow();
  absl::Status st = client_.Watch(options_.path, watch, [&](const WatchEvent& event) {
    if (std::string rv = StringAt(event.object, {"metadata", "resourceVersion"}); !rv.empty()) {
      rv_ = std::move(rv);
    }
    if (event.type != EventType::kBookmark) {
      delivered = true;
      callbacks_.on_event(event.type, event.object);
    }
    return absl::OkStatus();
  });
  if (st.ok() && !delivered &&
      clock_.MonotonicNow() - start < options_.min_watch_duration) {
    return absl::UnavailableError(
        absl::StrCat("WATCH ", options_.path, ": the server ended the watch at once"));
  }
  return st;
}

void ListWatch::Run(http::Cancellation& stop) {
  bool need_list = true;
  while (!stop.cancelled()) {
    absl::Status st;
    if (need_list) {
      absl::StatusOr<std::string> rv = ListAll();
      if (rv.ok()) {
        rv_ = *std::move(rv);
        need_list = false;
      } else {
        st = rv.status();
      }
    }
    bool delivered = false;
    if (st.ok()) {
      st = WatchOnce(stop, delivered);
      if (delivered) {
        backoff_ = options_.initial_backoff;
      }
      if (st.ok()) {
        continue;  // ended by its timeout: resume from the last version seen
      }
      if (stop.cancelled()) {
        return;
      }
      if (st.code() == absl::StatusCode::kOutOfRange) {
        need_list = true;  // 410: that version is gone; only a fresh list catches up
        if (callbacks_.on_error) {
          callbacks_.on_error(st);
        }
        continue;
      }
      // A lost connection resumes the watch; anything else (a bad event, a permission
      // change) starts over from a list.
      need_list = st.code() != absl::StatusCode::kUnavailable;
    }
    if (callbacks_.on_error) {
      callbacks_.on_error(st);
    }
    if (stop.WaitFor(NextBackoff(), clock_)) {
      return;
    }
  }
}

}  // namespace kmodd::kube

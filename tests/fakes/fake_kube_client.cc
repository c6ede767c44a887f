#include "tests/fakes/fake_kube_client.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/json.h"
#include "controller/kube/merge_patch.h"

namespace kmodd::kube {
namespace {

std::string CollectionOf(const std::string& path) { return path.substr(0, path.rfind('/')); }

// "/api/v1/namespaces/ns/configmaps" -> "ns"
std::string NamespaceOf(const std::string& collection) {
  const std::string marker = "/namespaces/";
  const size_t at = collection.find(marker);
  if (at == std::string::npos) {
    return "";
  }
  const size_t start = at + marker.size();
  return collection.substr(start, collection.find('/', start) - start);
}

// Whether an object of `collection` is listed and watched at `path`: the same collection,
// or every namespace's (".../modules" lists ".../namespaces/ns/modules" too).
bool Lists(const std::string& path, const std::string& collection) {
  if (collection == path) {
    return true;
  }
  const std::string ns = NamespaceOf(collection);
  if (ns.empty()) {
    return false;
  }
  std::string all = collection;
  all.erase(all.find("/namespaces/"), std::string("/namespaces/").size() + ns.size());
  return all == path;
}

}  // namespace

absl::Status FakeKubeClient::TakeFailure(std::string call) {
  calls_.push_back(std::move(call));
  if (failures_.empty()) {
    return absl::OkStatus();
  }
  absl::Status st = failures_.front();
  failures_.pop_front();
  return st;
}

void FakeKubeClient::FailNext(absl::Status error) {
  std::lock_guard<std::mutex> lock(mu_);
  failures_.push_back(std::move(error));
}

void FakeKubeClient::Compact() {
  std::lock_guard<std::mutex> lock(mu_);
  compacted_ = rv_;
  ++epoch_;
  log_.clear();
  changed_.notify_all();
}

std::map<std::string, Value> FakeKubeClient::Objects(std::string_view collection) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, Value> out;
  for (const auto& [path, object] : objects_) {
    if (CollectionOf(path) == collection) {
      out.emplace(StringAt(object, {"metadata", "name"}), object);
    }
  }
  return out;
}

std::vector<std::string> FakeKubeClient::calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_;
}

absl::StatusOr<Value> FakeKubeClient::Store(const std::string& path, Value object,
                                            EventType type) {
  ++rv_;
  Value metadata = object.Find("metadata") ? *object.Find("metadata") : Value::EmptyMap();
  metadata = With(metadata, "resourceVersion", absl::StrCat(rv_));
  if (type == EventType::kAdded) {
    metadata = With(metadata, "uid", absl::StrCat("uid-", ++uid_));
    if (const std::string ns = NamespaceOf(CollectionOf(path)); !ns.empty()) {
      metadata = With(metadata, "namespace", ns);
    }
  }
  object = With(object, "metadata", std::move(metadata));
  if (type == EventType::kDeleted) {
    objects_.erase(path);
  } else {
    objects_[path] = object;
  }
  log_.push_back(Change{rv_, CollectionOf(path), type, object});
  changed_.notify_all();
  return object;
}

absl::StatusOr<Value> FakeKubeClient::Get(std::string_view path) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status st = TakeFailure(absl::StrCat("GET ", std::string(path))); !st.ok()) {
    return st;
  }
  auto it = objects_.find(std::string(path));
  if (it == objects_.end()) {
    return absl::NotFoundError(absl::StrCat("GET ", std::string(path), ": 404 NotFound"));
  }
  return it->second;
}

absl::StatusOr<ObjectList> FakeKubeClient::List(std::string_view path, const ListOptions& options) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status st = TakeFailure(absl::StrCat("LIST ", std::string(path))); !st.ok()) {
    return st;
  }
  // Equality label selectors only ("k=v,k2=v2"), the form kmodd sends.
  std::vector<std::pair<std::string, std::string>> wanted;
  for (absl::string_view term : absl::StrSplit(options.label_selector, ',', absl::SkipEmpty())) {
    const std::pair<std::string, std::string> kv = absl::StrSplit(term, absl::MaxSplits('=', 1));
    wanted.push_back(kv);
  }
  ObjectList list;
  for (const auto& entry : objects_) {
    if (!Lists(std::string(path), CollectionOf(entry.first))) {
      continue;
    }
    const Value& object = entry.second;
    const bool match = std::all_of(wanted.begin(), wanted.end(), [&object](const auto& kv) {
      const Value* v = Lookup(object, {"metadata", "labels", kv.first});
      return v != nullptr && v->IsString() && v->AsString() == kv.second;
    });
    if (match) {
      list.items.push_back(object);
    }
  }
  list.resource_version = absl::StrCat(rv_);
  return list;
}

absl::Status FakeKubeClient::Watch(std::string_view path, const WatchOptions& options,
                                   const WatchHandler& handler) {
  std::unique_lock<std::mutex> lock(mu_);
  if (absl::Status st = TakeFailure(absl::StrCat("WATCH ", std::string(path))); !st.ok()) {
    return st;
  }
  int64_t from = 0;
  if (!options.resource_version.empty() &&
      !absl::SimpleAtoi(options.resource_version, &from)) {
    return absl::InvalidArgumentError("bad resourceVersion");
  }
  if (from < compacted_) {
    return absl::OutOfRangeError(absl::StrCat("WATCH ", std::string(path), ": 410 Expired"));
  }
  const int64_t epoch = epoch_;
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (epoch_ != epoch) {
      return absl::OutOfRangeError(absl::StrCat("WATCH ", std::string(path), ": 410 Expired"));
    }
    std::vector<Change> pending;
    for (const Change& change : log_) {
      if (change.rv > from && Lists(std::string(path), change.collection)) {
        pending.push_back(change);
      }
    }
    if (!pending.empty()) {
      from = pending.back().rv;
      lock.unlock();
      for (const Change& change : pending) {
        if (absl::Status st = handler(WatchEvent{change.type, change.object}); !st.ok()) {
          return st;
        }
      }
      lock.lock();
      continue;
    }
    if (options.cancel != nullptr && options.cancel->cancelled()) {
      return absl::CancelledError("watch cancelled");
    }
    changed_.wait_for(lock, std::chrono::milliseconds(10));
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> FakeKubeClient::Create(std::string_view collection, const Value& object) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status st = TakeFailure(absl::StrCat("POST ", std::string(collection))); !st.ok()) {
    return st;
  }
  std::string name = StringAt(object, {"metadata", "name"});
  Value stored = object;
  if (name.empty() && !StringAt(object, {"metadata", "generateName"}).empty()) {
    // As the API server: generateName plus a suffix of its own.
    name = absl::StrCat(StringAt(object, {"metadata", "generateName"}), "g", ++uid_);
    stored = With(stored, "metadata", With(*Lookup(stored, {"metadata"}), "name", name));
  }
  if (name.empty()) {
    return absl::InvalidArgumentError("POST: metadata.name is required");
  }
  const std::string path = absl::StrCat(std::string(collection), "/", name);
  if (objects_.count(path) != 0) {
    return absl::AlreadyExistsError(absl::StrCat("POST ", path, ": 409 AlreadyExists"));
  }
  return Store(path, std::move(stored), EventType::kAdded);
}

absl::StatusOr<Value> FakeKubeClient::Write(std::string_view path_view, const Value& body,
                                            bool merge) {
  std::string path(path_view);
  const bool status_only = absl::EndsWith(path, "/status");
  if (status_only) {
    path.resize(path.size() - std::string_view("/status").size());
  }
  auto it = objects_.find(path);
  if (it == objects_.end()) {
    return absl::NotFoundError(absl::StrCat(path, ": 404 NotFound"));
  }
  const std::string want = StringAt(body, {"metadata", "resourceVersion"});
  if (!want.empty() && want != StringAt(it->second, {"metadata", "resourceVersion"})) {
    return absl::AbortedError(
        absl::StrCat(path, ": 409 Conflict: the object has been modified"));
  }
  Value next;
  if (status_only) {
    const Value* status = body.Find("status");
    Value patch;
    patch.Set("status", status != nullptr ? *status : Value());
    next = merge ? ApplyMergePatch(it->second, patch) : With(it->second, "status", patch);
  } else {
    next = merge ? ApplyMergePatch(it->second, body) : body;
  }
  return Store(path, std::move(next), EventType::kModified);
}

absl::StatusOr<Value> FakeKubeClient::Update(std::string_view path, const Value& object) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status st = TakeFailure(absl::StrCat("PUT ", std::string(path))); !st.ok()) {
    return st;
  }
  return Write(path, object, /*merge=*/false);
}

absl::StatusOr<Value> FakeKubeClient::MergePatch(std::string_view path, const Value& patch) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status st = TakeFailure(absl::StrCat("PATCH ", std::string(path))); !st.ok()) {
    return st;
  }
  return Write(path, patch, /*merge=*/true);
}

absl::StatusOr<Value> FakeKubeClient::Apply(std::string_view path, const Value& object,
                                            const ApplyOptions& options) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status st = TakeFailure(absl::StrCat("APPLY ", std::string(path))); !st.ok()) {
    return st;
  }
  if (options.field_manager.empty()) {
    return absl::InvalidArgumentError("APPLY: a field manager is required");
  }
  const std::string p(path);
  if (objects_.count(p) == 0) {
    return Store(p, object, EventType::kAdded);
  }
  return Write(path, object, /*merge=*/true);
}

absl::Status FakeKubeClient::Delete(std::string_view path) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status st = TakeFailure(absl::StrCat("DELETE ", std::string(path))); !st.ok()) {
    return st;
  }
  auto it = objects_.find(std::string(path));
  if (it == objects_.end()) {
    return absl::NotFoundError(absl::StrCat("DELETE ", std::string(path), ": 404 NotFound"));
  }
  const std::string p = it->first;  // Store erases the entry
  const Value object = it->second;
  return Store(p, object, EventType::kDeleted).status();
}

}  // namespace kmodd::kube

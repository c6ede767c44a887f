#include "controller/kube/events.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json.h"
#include "controller/kube/time_format.h"

namespace kmodd::kube {

EventRecorder::EventRecorder(KubeClient& client, const Clock& clock, std::string component,
                             std::string instance)
    : client_(client),
      clock_(clock),
      component_(std::move(component)),
      instance_(std::move(instance)) {}

absl::Status EventRecorder::Record(const ObjectReference& object, std::string_view type,
                                   std::string_view reason, std::string_view message_in,
                                   const std::map<std::string, std::string>& annotations) {
  const std::string message(message_in.substr(0, kMaxMessage));
  std::string key = absl::StrCat(object.uid, "\x1f", object.kind, "\x1f", object.ns, "\x1f",
                                 object.name, "\x1f", std::string(type), "\x1f",
                                 std::string(reason), "\x1f", message);
  for (const auto& [k, v] : annotations) {
    absl::StrAppend(&key, "\x1f", k, "=", v);
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = made_.find(key);
  if (it != made_.end()) {
    Value patch;
    patch.Set("count", it->second.count + 1);
    patch.Set("lastTimestamp", FormatKubeTime(clock_.Now()));
    absl::StatusOr<Value> patched = client_.MergePatch(it->second.path, patch);
    if (patched.ok()) {
      it->second.count = IntAt(*patched, {"count"});
      return absl::OkStatus();
    }
    if (patched.status().code() != absl::StatusCode::kNotFound) {
      return patched.status();
    }
    made_.erase(it);  // expired (events live an hour): start a new one
  }
  return CreateNew(object, type, reason, message, annotations, key);
}

absl::Status EventRecorder::CreateNew(const ObjectReference& object, std::string_view type,
                                      std::string_view reason, const std::string& message,
                                      const std::map<std::string, std::string>& annotations,
                                      const std::string& key) {
  const absl::Time now = clock_.Now();
  const std::string ns = object.ns.empty() ? "default" : object.ns;
  // Unique like client-go's "<name>.<unix nanos in hex>", with a sequence for events made
  // within one clock tick.
  const std::string name = absl::StrFormat("%s.%x%04x", object.name, absl::ToUnixNanos(now),
                                           ++sequence_ & 0xffff);
  Value metadata;
  metadata.Set("name", name);
  metadata.Set("namespace", ns);
  if (!annotations.empty()) {
    Value a = Value::EmptyMap();
    for (const auto& [k, v] : annotations) {
      a.Set(k, v);
    }
    metadata.Set("annotations", std::move(a));
  }
  Value involved;
  involved.Set("apiVersion", object.api_version);
  involved.Set("kind", object.kind);
  if (!object.ns.empty()) {
    involved.Set("namespace", object.ns);
  }
  involved.Set("name", object.name);
  if (!object.uid.empty()) {
    involved.Set("uid", object.uid);
  }
  Value source;
  source.Set("component", component_);
  Value event;
  event.Set("apiVersion", "v1");
  event.Set("kind", "Event");
  event.Set("metadata", std::move(metadata));
  event.Set("involvedObject", std::move(involved));
  event.Set("type", std::string(type));
  event.Set("reason", std::string(reason));
  event.Set("message", message);
  event.Set("source", std::move(source));
  event.Set("firstTimestamp", FormatKubeTime(now));
  event.Set("lastTimestamp", FormatKubeTime(now));
  event.Set("count", 1);
  event.Set("reportingComponent", component_);
  event.Set("reportingInstance", instance_);
  const std::string collection = ResourcePath("v1", "events", ns);
  absl::StatusOr<Value> created = client_.Create(collection, event);
  if (!created.ok()) {
    return created.status();
  }
  if (made_.size() >= kMaxRemembered) {
    made_.clear();  // forgetting only costs a new Event instead of a count bump
  }
  made_[key] = Made{absl::StrCat(collection, "/", name), 1};
  return absl::OkStatus();
}

}  // namespace kmodd::kube

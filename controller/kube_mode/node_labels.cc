#include "controller/kube_mode/node_labels.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/json.h"
#include "controller/kube/events.h"

namespace kmodd::server {

namespace {

constexpr absl::string_view kReady = ".ready";
constexpr absl::string_view kVersionReady = ".version.ready";

Value OneLabelPatch(const std::string& key, const Value& value) {
  Value labels = Value::EmptyMap();
  labels.Set(key, value);
  return Value(Value::Map{{"metadata", Value(Value::Map{{"labels", std::move(labels)}})}});
}

// A .ready label (not .version.ready): the one KMM's Events are about.
bool IsReadyLabel(const std::string& key) {
  return absl::EndsWith(key, kReady) && !absl::EndsWith(key, kVersionReady) &&
         !ModuleOfLabel(key).empty();
}

}  // namespace

LabelWrite WriteNodeLabels(kube::KubeClient& client, const std::string& node,
                           const Value& patch) {
  const std::string path = kube::ResourcePath("v1", "nodes", "", node);
  LabelWrite out;
  absl::StatusOr<Value> r = client.MergePatch(path, patch);
  if (r.ok()) {
    return out;
  }
  const Value* labels = Lookup(patch, {"metadata", "labels"});
  // 400/422: the API server validated the patched Node and said no, to the whole patch.
  if (!absl::IsInvalidArgument(r.status()) || labels == nullptr || !labels->IsMap()) {
    out.error = r.status();
    return out;
  }
  if (labels->AsMap().size() == 1) {
    out.refused[labels->AsMap().front().first] = std::string(r.status().message());
    return out;
  }
  for (const auto& [key, value] : labels->AsMap()) {
    absl::StatusOr<Value> one = client.MergePatch(path, OneLabelPatch(key, value));
    if (one.ok()) {
      continue;
    }
    if (!absl::IsInvalidArgument(one.status())) {
      out.error = one.status();  // the rest is retried with everything else
      return out;
    }
    out.refused[key] = std::string(one.status().message());
  }
  return out;
}

Labels PatchedLabels(const Labels& before, const Value& patch,
                     const std::map<std::string, std::string>& refused) {
  Labels after = before;
  const Value* labels = Lookup(patch, {"metadata", "labels"});
  if (labels == nullptr || !labels->IsMap()) {
    return after;
  }
  for (const auto& [key, value] : labels->AsMap()) {
    if (refused.count(key) != 0) {
      continue;
    }
    if (value.IsString()) {
      after[key] = value.AsString();
    } else {
      after.erase(key);
    }
  }
  return after;
}

void RefusedLabels::Filter(const std::string& node, Labels& desired, Clock::time_point now) {
  auto n = by_node_.find(node);
  if (n == by_node_.end()) {
    return;
  }
  for (auto it = n->second.begin(); it != n->second.end();) {
    auto d = desired.find(it->first);
    if (d == desired.end() || d->second != it->second.value) {
      it = n->second.erase(it);  // no longer wanted like that: a new value is asked at once
      continue;
    }
    if (now - it->second.at < kRetry) {
      desired.erase(d);
    }
    ++it;
  }
  if (n->second.empty()) {
    by_node_.erase(n);
  }
}

bool RefusedLabels::Refused(const std::string& node, const std::string& key,
                            const std::string& value, Clock::time_point now) {
  auto [it, inserted] = by_node_[node].try_emplace(key, Refusal{value, now});
  const bool news = inserted || it->second.value != value;
  it->second = Refusal{value, now};
  return news;
}

void RefusedLabels::Accepted(const std::string& node, const Labels& written) {
  auto n = by_node_.find(node);
  if (n == by_node_.end()) {
    return;
  }
  for (const auto& [key, value] : written) {
    n->second.erase(key);
  }
  if (n->second.empty()) {
    by_node_.erase(n);
  }
}

std::optional<RefusedLabels::Clock::duration> RefusedLabels::RetryIn(
    const std::string& node, Clock::time_point now) const {
  auto n = by_node_.find(node);
  if (n == by_node_.end() || n->second.empty()) {
    return std::nullopt;
  }
  Clock::time_point first = Clock::time_point::max();
  for (const auto& [key, refusal] : n->second) {
    first = std::min(first, refusal.at);
  }
  return std::max(Clock::duration::zero(), first + kRetry - now);
}

std::string ModuleOfLabel(const std::string& key) {
  if (!absl::StartsWith(key, kLabelPrefix)) {
    return "";
  }
  absl::string_view rest = key;
  rest.remove_prefix(sizeof(kLabelPrefix) - 1);
  if (absl::StartsWith(rest, "version-module.")) {
    return "";  // the user's ordered-upgrade label
  }
  if (absl::EndsWith(rest, kVersionReady)) {
    rest.remove_suffix(kVersionReady.size());
  } else if (absl::EndsWith(rest, kReady)) {
    rest.remove_suffix(kReady.size());
  } else {
    return "";
  }
  // <namespace>.<name>: a namespace has no dots, a Module name may.
  const size_t dot = rest.find('.');
  if (dot == absl::string_view::npos || dot == 0 || dot + 1 == rest.size()) {
    return "";
  }
  return absl::StrCat(rest.substr(0, dot), "/", rest.substr(dot + 1));
}

std::vector<NodeEvent> ReadyLabelEvents(const Labels& before, const Labels& after) {
  std::vector<NodeEvent> out;
  auto event = [&out](const char* reason, const std::string& key, const char* what) {
    const std::string module = ModuleOfLabel(key);
    out.push_back(NodeEvent{kube::kEventNormal, reason, absl::StrCat("Module ", module, what),
                            {{"module", module}}});
  };
  for (const auto& [key, value] : after) {
    if (IsReadyLabel(key) && before.count(key) == 0) {
      event("ModuleLoaded", key, " loaded into the kernel");
    }
  }
  for (const auto& [key, value] : before) {
    if (IsReadyLabel(key) && after.count(key) == 0) {
      event("ModuleUnloaded", key, " unloaded from the kernel");
    }
  }
  return out;
}

NodeEvent LabelRefusedEvent(const std::string& key, const std::string& value,
                            const std::string& error) {
  NodeEvent e{kube::kEventWarning, "NodeLabelRefused",
              absl::StrCat("the API server refused the node label ", key, "=", value, " (",
                           error, "); the node's other labels are written, this one is tried "
                           "again every ", RefusedLabels::kRetry.count(), " s"),
              {}};
  if (std::string module = ModuleOfLabel(key); !module.empty()) {
    e.annotations["module"] = std::move(module);
  }
  return e;
}

}  // namespace kmodd::server

#include "controller/kube_mode/node_labeler.h"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "controller/kube_mode/dra_daemonset.h"
#include "controller/kube_mode/plugin_daemonset.h"
#include "controller/placement/selection.h"

namespace kmodd::server {

std::string ReadyLabel(const std::string& ns, const std::string& name) {
  return absl::StrCat(kLabelPrefix, ns, ".", name, ".ready");
}

std::string VersionReadyLabel(const std::string& ns, const std::string& name) {
  return absl::StrCat(kLabelPrefix, ns, ".", name, ".version.ready");
}

std::string DraReadyLabel(const std::string& ns, const std::string& name) {
  return absl::StrCat(kLabelPrefix, ns, ".", name, ".dra-ready");
}

bool IsOwnedLabel(const std::string& key) {
  // <ns>.<name>.ready, .version.ready, .device-plugin-target, .device-plugin-ready and
  // .dra-ready, and version-schedule-pod.<ns>.<name>; not version-module.* (the user's).
  if (key == kKernelVersionLabel || !ModuleOfLabel(key).empty() ||
      absl::StartsWith(key, kSchedulePodPrefix)) {
    return true;
  }
  return absl::StartsWith(key, kLabelPrefix) &&
         (absl::EndsWith(key, kTargetSuffix) || absl::EndsWith(key, ".dra-target") ||
          absl::EndsWith(key, ".device-plugin-ready") || absl::EndsWith(key, ".dra-ready"));
}

Labels TargetLabels(const source::NodeMeta& node, const std::vector<api::Module>& plugins,
                    const std::set<std::string>& draining) {
  Labels out;
  for (const api::Module& m : plugins) {
    if (draining.count(m.Key()) != 0 ||
        !placement::PodSchedulable(m, node.labels, node.unschedulable, node.taints)) {
      continue;
    }
    if (m.spec.device_plugin.has_value()) {
      out[DevicePluginTargetLabel(m.metadata.namespace_, m.metadata.name)] = "";
    }
    if (m.spec.dra.has_value()) {
      out[DraTargetLabel(m.metadata.namespace_, m.metadata.name)] = "";
    }
  }
  return out;
}

Labels SchedulePodLabels(const NodeRecord& node, const std::vector<api::Module>& plugins,
                         const std::set<std::string>& draining) {
  Labels out;
  for (const api::Module& m : plugins) {
    if (!m.spec.module_loader || m.spec.module_loader->container.version.empty() ||
        draining.count(m.Key()) != 0) {
      continue;
    }
    auto rm = std::find_if(node.modules.begin(), node.modules.end(),
                           [&](const ReportedModule& r) { return r.key == m.Key(); });
    if (rm != node.modules.end() && rm->phase == api::Phase::kLoaded && !rm->version.empty()) {
      out[SchedulePodVersionLabel(m.metadata.namespace_, m.metadata.name)] = rm->version;
    }
  }
  return out;
}

Labels PodReadyLabels(const NodePluginPods& pods) {
  Labels out;
  for (const auto& [key, p] : pods) {
    const size_t slash = key.find('/');
    const std::string ns = key.substr(0, slash);
    const std::string name = key.substr(slash + 1);
    if (p.device_plugin_ready) {
      out[DevicePluginReadyLabel(ns, name)] = "";
    }
    if (p.dra_ready) {
      out[DraReadyLabel(ns, name)] = "";
    }
  }
  return out;
}

Labels DesiredLabels(const NodeRecord& node) {
  Labels out;
  for (const ReportedModule& m : node.modules) {
    if (m.phase != api::Phase::kLoaded) {
      continue;
    }
    const size_t slash = m.key.find('/');
    if (slash == std::string::npos) {
      continue;
    }
    const std::string ns = m.key.substr(0, slash);
    const std::string name = m.key.substr(slash + 1);
    out[ReadyLabel(ns, name)] = "";
    if (!m.version.empty()) {
      out[VersionReadyLabel(ns, name)] = m.version;
    }
  }
  return out;
}

std::optional<Value> LabelPatch(const Labels& current, const Labels& desired) {
  Value labels = Value::EmptyMap();
  bool any = false;
  for (const auto& [k, v] : current) {
    if (IsOwnedLabel(k) && desired.count(k) == 0) {
      labels.Set(k, nullptr);
      any = true;
    }
  }
  for (const auto& [k, v] : desired) {
    auto it = current.find(k);
    if (it == current.end() || it->second != v) {
      labels.Set(k, v);
      any = true;
    }
  }
  if (!any) {
    return std::nullopt;
  }
  return Value(Value::Map{{"metadata", Value(Value::Map{{"labels", std::move(labels)}})}});
}

NodeLabeler::NodeLabeler(kube::KubeClient& client, kube::EventRecorder& events,
                         const Clock& clock, Logger& log, Post post)
    : client_(client), events_(events), post_(std::move(post)), clock_(clock), log_(log) {}

void NodeLabeler::Reset() {
  std::lock_guard lock(mu_);
  applied_.clear();
  refused_.Clear();
}

ReconcileResult NodeLabeler::Reconcile(const WriterView& view, const std::string& node) {
  const std::optional<NodeRecord> rec = view.Record(node);
  const std::optional<source::NodeMeta> api = view.ApiNode(node);
  if (!rec || !api) {
    return ReconcileResult::Ok();  // no agent ever, or not a Node the API lists
  }
  Labels desired;
  const std::set<std::string> draining = view.Draining(node);
  if (rec->connected ? !rec->reported : rec->modules.empty()) {
    // Not heard from yet: its module labels stay as they are (see the header).
    for (const auto& [k, v] : api->labels) {
      if (!ModuleOfLabel(k).empty() || absl::StartsWith(k, kSchedulePodPrefix)) {
        desired[k] = v;
      }
    }
  } else {
    desired = DesiredLabels(*rec);
    desired.merge(SchedulePodLabels(*rec, view.PluginModules(), draining));
  }
  desired.merge(TargetLabels(*api, view.PluginModules(), draining));
  if (std::optional<NodePluginPods> pods = view.PluginPods(node)) {
    desired.merge(PodReadyLabels(*pods));
  } else {
    // The Pods not listed yet: their labels stay as they are.
    for (const auto& [k, v] : api->labels) {
      if (absl::StartsWith(k, kLabelPrefix) &&
          (absl::EndsWith(k, ".device-plugin-ready") || absl::EndsWith(k, ".dra-ready"))) {
        desired[k] = v;
      }
    }
  }
  const Clock::Monotonic now = clock_.MonotonicNow();
  {
    std::lock_guard lock(mu_);
    refused_.Filter(node, desired, now);
  }
  std::optional<Value> patch = LabelPatch(api->labels, desired);
  {
    std::lock_guard lock(mu_);
    auto a = applied_.find(node);
    const bool fresh = a != applied_.end() && now - a->second.at < kRecheck;
    if (patch && fresh && a->second.labels == desired) {
      // Written already; the watch may not have brought it back yet.
      return ReconcileResult::RequeueAfter(kRecheck - (now - a->second.at));
    }
    if (!patch && fresh && a->second.labels != desired) {
      // The watch still shows the labels from before our last write, which wanted
      // something else: from what that write made, not from the watch. (Nothing else
      // would bring this node back: a change of our own labels is no hub change.)
      patch = LabelPatch(a->second.labels, desired);
    }
  }
  LabelWrite write;
  if (patch) {
    write = WriteNodeLabels(client_, node, *patch);
  }
  if (!write.error.ok()) {
    log_.Warn("cannot label a node", {{"node", node}, {"error", write.error.ToString()}});
    return ReconcileResult::Error(write.error);
  }
  std::vector<NodeEvent> events;
  absl::Status removal_refused;
  std::optional<RefusedLabels::Clock::duration> retry_refused;
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, error] : write.refused) {
      auto d = desired.find(key);
      if (d == desired.end()) {
        // Nothing to leave out: tried again with the key's backoff.
        removal_refused = absl::InvalidArgumentError(absl::StrCat("removing ", key, ": ", error));
        log_.Warn("cannot remove a node label", {{"node", node}, {"label", key}, {"error", error}});
        continue;
      }
      if (refused_.Refused(node, key, d->second, now)) {
        log_.Warn("node label refused",
                  {{"node", node}, {"label", key}, {"value", d->second}, {"error", error}});
        events.push_back(LabelRefusedEvent(key, d->second, error));
      }
      desired.erase(d);
    }
    refused_.Accepted(node, desired);
    retry_refused = refused_.RetryIn(node, now);
    if (removal_refused.ok()) {
      applied_[node] = Applied{desired, now};
    }
  }
  if (patch) {
    log_.Info(write.refused.empty() ? "node labels updated"
                                    : "node labels updated but for the refused ones",
              {{"node", node}, {"patch", ToJsonLine(*patch)}});
    const Labels after = PatchedLabels(api->labels, *patch, write.refused);
    for (NodeEvent& e : ReadyLabelEvents(api->labels, after)) {
      events.push_back(std::move(e));
    }
  }
  // After the write: a label is what users wait on; no one waits on the Events.
  for (const NodeEvent& e : events) {
    Record(*api, e);
  }
  if (!removal_refused.ok()) {
    return ReconcileResult::Error(removal_refused);
  }
  if (retry_refused) {
    return ReconcileResult::RequeueAfter(*retry_refused);
  }
  return ReconcileResult::Ok();
}

void NodeLabeler::Record(const source::NodeMeta& node, const NodeEvent& e) {
  auto record = [this, ref = kube::ObjectReference{"v1", "Node", "", node.name, node.uid}, e] {
    if (absl::Status s = events_.Record(ref, e.type, e.reason, e.message, e.annotations);
        !s.ok()) {
      log_.Warn("cannot record a Node event", {{"node", ref.name}, {"error", s.ToString()}});
    }
  };
  if (post_) {
    post_(std::move(record));
  } else {
    record();
  }
}

}  // namespace kmodd::server

#include "controller/kube_mode/refusal_events.h"

#include <utility>

#include "absl/strings/str_join.h"

namespace kmodd::server {

RefusalEvents::RefusalEvents(kube::EventRecorder& events, Logger& log, std::string reason,
                             std::string what)
    : events_(events), log_(log), reason_(std::move(reason)), what_(std::move(what)) {}

void RefusalEvents::Refused(const source::ModuleMeta& meta, const std::string& subject,
                            const std::string& message) {
  log_.Warn(what_ + " refused", {{"module", meta.Key()}, {"error", message}});
  {
    std::lock_guard lock(mu_);
    current_[meta.Key()][subject] = message;
    std::string& last = refused_[meta.Key()][subject];
    if (last == message) {
      return;
    }
    last = message;
  }
  kube::ObjectReference ref{"kmm.sigs.x-k8s.io/v1beta1", "Module", meta.ns, meta.name, meta.uid};
  if (absl::Status s = events_.Record(ref, kube::kEventWarning, reason_, message); !s.ok()) {
    log_.Warn("cannot record a Module event", {{"module", meta.Key()}, {"error", s.ToString()}});
    std::lock_guard lock(mu_);
    refused_[meta.Key()].erase(subject);  // evented again at the next refusal
  }
}

void RefusalEvents::Cleared(const std::string& key, const std::string& subject) {
  std::lock_guard lock(mu_);
  auto it = refused_.find(key);
  if (it != refused_.end()) {
    it->second.erase(subject);
  }
  if (auto c = current_.find(key); c != current_.end()) {
    c->second.erase(subject);
    if (c->second.empty()) {
      current_.erase(c);
    }
  }
}

void RefusalEvents::Forget(const std::string& key) {
  std::lock_guard lock(mu_);
  refused_.erase(key);
  current_.erase(key);
}

void RefusalEvents::Reset() {
  std::lock_guard lock(mu_);
  refused_.clear();
  current_.clear();
}

std::vector<std::string> RefusalEvents::Current(const std::string& key) {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  if (auto c = current_.find(key); c != current_.end()) {
    for (const auto& [subject, message] : c->second) {
      out.push_back(message);
    }
  }
  return out;
}

Condition AcceptedCondition(RefusalEvents& refusals, const std::string& key,
                            const std::string& type, const std::string& written) {
  const std::vector<std::string> refused = refusals.Current(key);
  if (refused.empty()) {
    return Condition{type, "True", "Written", written};
  }
  return Condition{type, "False", "Refused", absl::StrJoin(refused, "; ")};
}

}  // namespace kmodd::server

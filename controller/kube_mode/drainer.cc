#include "controller/kube_mode/drainer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kmodd::source {

namespace {

constexpr auto kLookEvery = std::chrono::seconds(1);
constexpr size_t kMaxNamed = 5;  // Pods named in a timeout's message

// The value at `path` in nested maps; null when any step is missing or not a map.
const Value* At(const Value& v, std::initializer_list<const char*> path) {
  const Value* at = &v;
  for (const char* key : path) {
    if (!at->IsMap()) {
      return nullptr;
    }
    at = at->Find(key);
    if (at == nullptr) {
      return nullptr;
    }
  }
  return at;
}

const std::string* StringAt(const Value& v, std::initializer_list<const char*> path) {
  const Value* at = At(v, path);
  return at != nullptr && at->IsString() ? &at->AsString() : nullptr;
}

const Value* MapAt(const Value& v, std::initializer_list<const char*> path) {
  const Value* at = At(v, path);
  return at != nullptr && at->IsMap() ? at : nullptr;
}

bool RequestsAny(const Value& pod, const std::vector<std::string>& resources) {
  const Value* spec = MapAt(pod, {"spec"});
  if (spec == nullptr || resources.empty()) {
    return false;
  }
  for (const char* list : {"containers", "initContainers"}) {
    const Value* containers = spec->Find(list);
    if (containers == nullptr || !containers->IsList()) {
      continue;
    }
    for (const Value& c : containers->AsList()) {
      for (const char* kind : {"requests", "limits"}) {
        const Value* amounts = MapAt(c, {"resources", kind});
        if (amounts == nullptr) {
          continue;
        }
        for (const auto& [name, amount] : amounts->AsMap()) {
          if (std::find(resources.begin(), resources.end(), name) != resources.end()) {
            return true;
          }
        }
      }
    }
  }
  return false;
}

bool HasLabels(const Value& pod, const std::map<std::string, std::string>& selector) {
  if (selector.empty()) {
    return false;
  }
  const Value* labels = MapAt(pod, {"metadata", "labels"});
  if (labels == nullptr) {
    return false;
  }
  return std::all_of(selector.begin(), selector.end(), [&](const auto& kv) {
    const Value* v = labels->Find(kv.first);
    return v != nullptr && v->IsString() && v->AsString() == kv.second;
  });
}

std::string PodId(const Value& pod) {
  const std::string* ns = StringAt(pod, {"metadata", "namespace"});
  const std::string* name = StringAt(pod, {"metadata", "name"});
  return ns != nullptr && name != nullptr ? absl::StrCat(*ns, "/", *name) : "";
}

}  // namespace

bool DrainMatches(const Value& pod, const api::DrainSpec& spec) {
  if (PodId(pod).empty()) {
    return false;
  }
  if (const std::string* phase = StringAt(pod, {"status", "phase"});
      phase != nullptr && (*phase == "Succeeded" || *phase == "Failed")) {
    return false;  // holds no device any more
  }
  if (const Value* labels = MapAt(pod, {"metadata", "labels"});
      labels != nullptr && labels->Find("kmm.node.kubernetes.io/module.name") != nullptr) {
    return false;  // a Module's plugin: the hub's Draining takes it off
  }
  return RequestsAny(pod, spec.resources) || HasLabels(pod, spec.pod_selector);
}

Drainer::Drainer(kube::KubeClient& client, Logger& log, const Clock& clock, Done done)
    : client_(client), log_(log), clock_(clock), done_(std::move(done)) {}

Drainer::~Drainer() { Stop(); }

void Drainer::Start() {
  worker_ = std::thread([this] { Worker(); });
}

void Drainer::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) {
    worker_.join();
  }
}

void Drainer::Request(const server::DrainRequest& r) {
  {
    std::lock_guard lock(mu_);
    requests_.push_back(r);
  }
  cv_.notify_all();
}

void Drainer::Release(const std::string& node, const std::string& module) {
  {
    std::lock_guard lock(mu_);
    releases_.emplace_back(node, module);
  }
  cv_.notify_all();
}

absl::Status Drainer::Cordon(const std::string& node, const std::string& module) {
  const std::string path = absl::StrCat("/api/v1/nodes/", node);
  absl::StatusOr<Value> n = client_.Get(path);
  if (!n.ok()) {
    return n.status();
  }
  const Value* spec = MapAt(*n, {"spec"});
  const Value* unschedulable = spec != nullptr ? spec->Find("unschedulable") : nullptr;
  if (unschedulable != nullptr && unschedulable->IsBool() && unschedulable->AsBool()) {
    const std::string* ours = StringAt(*n, {"metadata", "annotations", kCordonedForAnnotation});
    log_.Info("drain: the node is cordoned already; kmodd will not uncordon it",
              {{"node", node}, {"module", module},
               {"cordoned_for", ours != nullptr ? *ours : std::string("(someone else)")}});
    return absl::OkStatus();
  }
  Value patch = Value::EmptyMap();
  patch.Set("spec", Value(Value::Map{{"unschedulable", true}}));
  patch.Set("metadata",
            Value(Value::Map{{"annotations", Value(Value::Map{{kCordonedForAnnotation, module}})}}));
  absl::StatusOr<Value> done = client_.MergePatch(path, patch);
  if (done.ok()) {
    log_.Info("drain: node cordoned", {{"node", node}, {"module", module}});
  }
  return done.status();
}

void Drainer::Uncordon(const std::string& node, const std::string& module) {
  const std::string path = absl::StrCat("/api/v1/nodes/", node);
  absl::StatusOr<Value> n = client_.Get(path);
  if (!n.ok()) {
    log_.Warn("drain: cannot read the node to uncordon it",
              {{"node", node}, {"error", std::string(n.status().message())}});
    return;
  }
  const std::string* ours = StringAt(*n, {"metadata", "annotations", kCordonedForAnnotation});
  if (ours == nullptr || *ours != module) {
    return;  // not cordoned by kmodd for this Module: left as it is
  }
  Value patch = Value::EmptyMap();
  patch.Set("spec", Value(Value::Map{{"unschedulable", nullptr}}));
  patch.Set("metadata",
            Value(Value::Map{{"annotations", Value(Value::Map{{kCordonedForAnnotation, nullptr}})}}));
  absl::StatusOr<Value> done = client_.MergePatch(path, patch);
  if (done.ok()) {
    log_.Info("drain: node uncordoned: Ready on the module's new entry",
              {{"node", node}, {"module", module}});
  } else {
    log_.Warn("drain: cannot uncordon the node",
              {{"node", node}, {"module", module}, {"error", std::string(done.status().message())}});
  }
}

bool Drainer::Step(Active& a) {
  const server::DrainRequest& r = a.request;
  if (!a.cordon_done && r.spec.cordon) {
    if (absl::Status s = Cordon(r.node, r.module); !s.ok()) {
      log_.Warn("drain: cannot cordon the node; trying again",
                {{"node", r.node}, {"error", std::string(s.message())}});
      return false;
    }
  }
  a.cordon_done = true;
  kube::ListOptions opts;
  opts.field_selector = absl::StrCat("spec.nodeName=", r.node);
  absl::StatusOr<kube::ObjectList> pods = client_.List("/api/v1/pods", opts);
  std::vector<std::string> left;
  if (!pods.ok()) {
    log_.Warn("drain: cannot list the node's Pods; trying again",
              {{"node", r.node}, {"error", std::string(pods.status().message())}});
    left.push_back("(the node's Pods could not be listed)");
  } else {
    for (const Value& pod : pods->items) {
      if (!DrainMatches(pod, r.spec)) {
        continue;
      }
      const std::string id = PodId(pod);
      left.push_back(id);
      if (StringAt(pod, {"metadata", "deletionTimestamp"}) != nullptr) {
        continue;  // evicted, terminating
      }
      const size_t slash = id.find('/');
      Value eviction = Value::EmptyMap();
      eviction.Set("apiVersion", "policy/v1");
      eviction.Set("kind", "Eviction");
      eviction.Set("metadata", Value(Value::Map{{"name", id.substr(slash + 1)},
                                                {"namespace", id.substr(0, slash)}}));
      absl::StatusOr<Value> evicted = client_.Create(
          absl::StrCat("/api/v1/namespaces/", id.substr(0, slash), "/pods/", id.substr(slash + 1),
                       "/eviction"),
          eviction);
      if (evicted.ok()) {
        log_.Info("drain: Pod evicted", {{"node", r.node}, {"module", r.module}, {"pod", id}});
      } else if (!absl::IsNotFound(evicted.status()) && !a.refused_logged[id]) {
        a.refused_logged[id] = true;
        log_.Info("drain: eviction refused (a PodDisruptionBudget, or the API); trying again",
                  {{"node", r.node}, {"module", r.module}, {"pod", id},
                   {"error", std::string(evicted.status().message())}});
      }
    }
  }
  if (left.empty()) {
    done_(r, true, "");
    return true;
  }
  if (clock_.MonotonicNow() >= a.deadline) {
    std::vector<std::string> named(
        left.begin(), left.begin() + static_cast<std::ptrdiff_t>(std::min(left.size(), kMaxNamed)));
    done_(r, false,
          absl::StrCat("drain timed out after ", r.spec.timeout_seconds, " s: ", left.size(),
                       " Pod(s) still on the node: ", absl::StrJoin(named, ", "),
                       left.size() > kMaxNamed ? ", ..." : ""));
    return true;
  }
  return false;
}

void Drainer::Worker() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    clock_.WaitFor(lock, cv_, kLookEvery,
                   [this] { return stop_ || !requests_.empty() || !releases_.empty(); });
    if (stop_) {
      break;
    }
    std::vector<server::DrainRequest> requests = std::exchange(requests_, {});
    std::vector<std::pair<std::string, std::string>> releases = std::exchange(releases_, {});
    for (auto& r : requests) {
      const auto key = std::make_pair(r.node, r.module);
      Active a{r, clock_.MonotonicNow() + std::chrono::seconds(r.spec.timeout_seconds), false, {}};
      active_.insert_or_assign(key, std::move(a));  // a newer request supersedes
    }
    lock.unlock();
    for (const auto& [node, module] : releases) {
      Uncordon(node, module);
    }
    std::vector<std::pair<std::string, std::string>> ended;
    for (auto& [key, a] : active_) {
      if (Step(a)) {
        ended.push_back(key);
      }
    }
    lock.lock();
    for (const auto& key : ended) {
      active_.erase(key);
    }
  }
}

}  // namespace kmodd::source

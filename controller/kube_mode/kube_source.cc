#include "controller/kube_mode/kube_source.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "api/decode.h"
#include "api/validate.h"
#include "controller/kube/list_watch.h"

namespace kmodd::source {

namespace {

constexpr char kModulesGroupVersion[] = "kmm.sigs.x-k8s.io/v1beta1";

std::string ObjectName(const Value& o) {
  const std::string ns = StringAt(o, {"metadata", "namespace"});
  const std::string name = StringAt(o, {"metadata", "name"});
  return ns.empty() ? name : absl::StrCat(ns, "/", name);
}

// A list item has no kind or apiVersion; the decoder needs both.
std::string AsDocument(const Value& o, const char* api_version, const char* kind) {
  return ToJsonLine(With(With(o, "apiVersion", api_version), "kind", kind));
}

}  // namespace

std::optional<api::Module> CheckModuleObject(const Value& object,
                                             std::vector<api::Diagnostic>& errors) {
  const std::string object_name = absl::StrCat("Module ", ObjectName(object));
  api::Decoded d =
      api::DecodeDocuments(AsDocument(object, kModulesGroupVersion, "Module"), object_name);
  for (api::Diagnostic& e : d.errors) {
    // Located by the object, not by a file: the API server has no lines.
    errors.push_back(api::Diagnostic{"", 0, object_name, e.path, e.message});
  }
  if (!d.errors.empty()) {
    return std::nullopt;
  }
  if (d.modules.size() != 1) {
    errors.push_back(api::Diagnostic{"", 0, object_name, "", "not decoded"});
    return std::nullopt;
  }
  api::Module m = std::move(d.modules.front().object);
  std::vector<api::FieldError> found = api::ValidateModule(m);
  for (api::FieldError& e : found) {
    errors.push_back(api::Diagnostic{"", 0, object_name, std::move(e.path), std::move(e.message)});
  }
  if (!found.empty()) {
    return std::nullopt;
  }
  return m;
}

absl::StatusOr<api::Module> ModuleFromObject(const Value& object) {
  std::vector<api::Diagnostic> errors;
  std::optional<api::Module> m = CheckModuleObject(object, errors);
  if (!m) {
    return absl::InvalidArgumentError(errors.front().ToString());
  }
  return *std::move(m);
}

absl::StatusOr<api::Node> NodeFromObject(const Value& object) {
  api::Decoded d = api::DecodeDocuments(AsDocument(object, "v1", "Node"), "Node");
  if (!d.errors.empty() || d.nodes.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Node ", ObjectName(object), ": ",
                     d.errors.empty() ? std::string("not decoded") : d.errors.front().message));
  }
  api::Node n = std::move(d.nodes.front().object);
  n.metadata.namespace_.clear();  // cluster-scoped
  if (auto k = n.metadata.labels.find(kKernelReleaseLabel);
      k != n.metadata.labels.end() && !k->second.empty()) {
    n.node_info.kernel_version = k->second;
  }
  return n;
}

ModuleMeta ModuleMetaFromObject(const Value& object) {
  ModuleMeta m;
  m.ns = StringAt(object, {"metadata", "namespace"});
  m.name = StringAt(object, {"metadata", "name"});
  m.uid = StringAt(object, {"metadata", "uid"});
  m.resource_version = StringAt(object, {"metadata", "resourceVersion"});
  m.deleting = !StringAt(object, {"metadata", "deletionTimestamp"}).empty();
  if (const Value* f = Lookup(object, {"metadata", "finalizers"}); f && f->IsList()) {
    for (const Value& v : f->AsList()) {
      if (v.IsString()) {
        m.finalizers.push_back(v.AsString());
      }
    }
  }
  return m;
}

std::string ModuleObjectPath(const std::string& ns, const std::string& name) {
  return kube::ResourcePath(kModulesGroupVersion, "modules", ns, name);
}

std::optional<server::PullSecretState> PullSecretProblem(const std::string& key,
                                                         const absl::Status& error) {
  const std::string ns = key.substr(0, key.find('/'));
  const std::string name = key.substr(ns.size() + 1);
  const std::string without = "; until then nodes pull its Modules' images without credentials";
  const std::string recreate =
      absl::StrCat("recreate it with kubectl create secret docker-registry ", name, " -n ", ns,
                   " --docker-server=... --docker-username=... --docker-password=...");
  switch (error.code()) {
    case absl::StatusCode::kNotFound:
      return server::PullSecretState{
          false, "NotFound",
          absl::StrCat("Secret ", key, " (spec.imageRepoSecret) not found: create it in namespace ",
                       ns, " (kubectl create secret docker-registry ", name,
                       " -n ", ns, " ...), or remove spec.imageRepoSecret", without)};
    case absl::StatusCode::kFailedPrecondition:
      return server::PullSecretState{
          false, "WrongType",
          absl::StrCat(error.message(), ": kmodd takes only kubernetes.io/dockerconfigjson Secrets: ",
                       recreate, without)};
    case absl::StatusCode::kInvalidArgument:
      return server::PullSecretState{
          false, "InvalidContent",
          absl::StrCat(error.message(), ": nodes could not use it and are not sent it: ", recreate,
                       without)};
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return server::PullSecretState{
          false, "Forbidden",
          absl::StrCat("Secret ", key, " cannot be read: ", error.message(),
                       ": the controller reads Secrets only in the namespaces it is given: add ",
                       ns, " to the Helm value moduleNamespaces (or, with kustomize, a "
                       "RoleBinding to Role kmodd-pull-secrets there: docs/deployment.md); "
                       "nodes are sent the last copy read, if any")};
    default:
      return std::nullopt;  // the API server is away: the next look-up will tell
  }
}

KubeSource::KubeSource(kube::KubeClient& client, server::Hub& hub, const Clock& clock,
                       Logger& log)
    : client_(client), hub_(hub), clock_(clock), log_(log) {}

KubeSource::~KubeSource() { Stop(); }

void KubeSource::Start() {
  nodes_thread_ = std::thread([this] { RunNodes(); });
  modules_thread_ = std::thread([this] { RunModules(); });
  secrets_thread_ = std::thread([this] { RunSecrets(); });
  pods_thread_ = std::thread([this] { RunPluginPods(); });
  policies_thread_ = std::thread([this] { RunPolicies(); });
}

void KubeSource::Stop() {
  stop_.Cancel();
  {
    std::lock_guard lock(mu_);  // a waiter between its check and its wait sees the cancel
  }
  nodes_synced_cv_.notify_all();
  for (std::thread* t :
       {&nodes_thread_, &modules_thread_, &secrets_thread_, &pods_thread_, &policies_thread_}) {
    if (t->joinable()) {
      t->join();
    }
  }
}

void KubeSource::LogWatchError(const std::string& what, const absl::Status& e) {
  if (e.code() == absl::StatusCode::kOutOfRange) {
    // The version the watch would resume from is compacted away: list everything again.
    log_.Info(absl::StrCat("watch of ", what, " expired; listing again"),
              {{"error", e.ToString()}});
    return;
  }
  log_.Warn(absl::StrCat("watch of ", what, " failed; retrying"), {{"error", e.ToString()}});
}

void KubeSource::RunNodes() {
  kube::ListWatchOptions o;
  o.path = kube::ResourcePath("v1", "nodes");
  kube::ListWatch lw(
      client_, o,
      {[this](const std::vector<Value>& objects) { OnNodeSync(objects); },
       [this](kube::EventType t, const Value& object) { OnNodeEvent(t, object); },
       [this](const absl::Status& e) { LogWatchError("Nodes", e); }},
      clock_);
  lw.Run(stop_);
}

void KubeSource::RunPluginPods() {
  kube::ListWatchOptions o;
  o.path = kube::ResourcePath("v1", "pods");
  o.label_selector = kPluginPodSelector;
  kube::ListWatch lw(
      client_, o,
      {[this](const std::vector<Value>& objects) { hub_.SetAllPluginPods(pods_.Sync(objects)); },
       [this](kube::EventType t, const Value& object) {
         for (const auto& [node, summary] : pods_.Apply(t, object)) {
           hub_.SetPluginPods(node, summary);
         }
       },
       [this, listed = false](const absl::Status& e) mutable {
         LogWatchError("plugin Pods", e);
         if (absl::IsPermissionDenied(e) && !listed) {
           // Not granted (deploy/ grants it): serve the nodes all the same, without the
           // plugin's order or its ready labels, rather than never.
           listed = true;
           log_.Warn("Pods cannot be listed: device plugins are not drained before their "
                     "driver changes; grant list and watch on Pods (deploy/)",
                     {{"error", e.ToString()}});
           hub_.SetAllPluginPods({});
         }
       }},
      clock_);
  lw.Run(stop_);
}

void KubeSource::RunPolicies() {
  kube::ListWatchOptions o;
  o.path = kube::ResourcePath(api::kKmoddGroupVersion, "modulepolicies");
  auto log_problems = [this] {
    for (const std::string& p : policies_.TakeProblems()) {
      log_.Warn("ModulePolicy ignored", {{"problem", p}});
    }
  };
  kube::ListWatch lw(
      client_, o,
      {[this, log_problems](const std::vector<Value>& objects) {
         hub_.SetPolicies(policies_.Sync(objects));
         log_problems();
       },
       [this, log_problems](kube::EventType t, const Value& object) {
         if (auto by_module = policies_.Apply(t, object)) {
           hub_.SetPolicies(*std::move(by_module));
         }
         log_problems();
       },
       [this, unlisted = true](const absl::Status& e) mutable {
         LogWatchError("ModulePolicies", e);
         if (unlisted && (absl::IsNotFound(e) || absl::IsPermissionDenied(e))) {
           // No CRD (or not granted): every Module reaches its nodes at once, as without
           // a policy, rather than never.
           unlisted = false;
           log_.Warn("ModulePolicies cannot be listed: Modules are pushed without rollout "
                     "pacing; apply deploy/crd/kmodd.io_modulepolicies.yaml and grant list "
                     "and watch on them (deploy/)",
                     {{"error", e.ToString()}});
           hub_.SetPolicies({});
         }
       }},
      clock_);
  lw.Run(stop_);
}

void KubeSource::RunModules() {
  // The first plan must see every Node: wait for their list.
  {
    std::unique_lock lock(mu_);
    auto done = [this] { return nodes_synced_.load() || stop_.cancelled(); };
    while (!done()) {
      clock_.WaitFor(lock, nodes_synced_cv_, std::chrono::hours(1), done);
    }
  }
  if (stop_.cancelled()) {
    return;
  }
  kube::ListWatchOptions o;
  o.path = kube::ResourcePath(kModulesGroupVersion, "modules");
  kube::ListWatch lw(
      client_, o,
      {[this](const std::vector<Value>& objects) { OnModuleSync(objects); },
       [this](kube::EventType t, const Value& object) { OnModuleEvent(t, object); },
       [this](const absl::Status& e) { LogWatchError("Modules", e); }},
      clock_);
  lw.Run(stop_);
}

void KubeSource::RunSecrets() {
  // A second's tick: Secrets that cannot be read are looked up every few seconds, the
  // others every few minutes (RefreshSecret schedules each).
  while (!stop_.WaitFor(std::chrono::seconds(1), clock_)) {
    const Clock::Monotonic now = clock_.MonotonicNow();
    std::set<std::string> due;
    {
      std::lock_guard lock(mu_);
      std::set<std::string> named;
      for (const auto& [module, secret] : secret_of_) {
        named.insert(secret);
        auto it = secret_checks_.find(secret);
        if (it == secret_checks_.end() || it->second.next <= now) {
          due.insert(secret);
        }
      }
      std::erase_if(secret_checks_, [&](const auto& c) { return named.count(c.first) == 0; });
    }
    for (const std::string& key : due) {
      RefreshSecret(key);
    }
  }
}

void KubeSource::OnNodeSync(const std::vector<Value>& objects) {
  std::set<std::string> seen;
  for (const Value& o : objects) {
    seen.insert(StringAt(o, {"metadata", "name"}));
    OnNodeEvent(kube::EventType::kAdded, o);
  }
  std::vector<std::string> gone;
  {
    std::lock_guard lock(mu_);
    for (auto it = nodes_.begin(); it != nodes_.end();) {
      if (seen.count(it->first) == 0) {
        gone.push_back(it->first);
        it = nodes_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& name : gone) {
    hub_.RemoveApiNode(name);
  }
  if (!nodes_synced_.exchange(true)) {
    log_.Info("Nodes listed", {{"nodes", static_cast<int64_t>(objects.size())}});
    {
      std::lock_guard lock(mu_);  // RunModules between its check and its wait sees it
    }
    nodes_synced_cv_.notify_all();
  }
}

void KubeSource::OnNodeEvent(kube::EventType type, const Value& object) {
  const std::string name = StringAt(object, {"metadata", "name"});
  if (type == kube::EventType::kDeleted) {
    {
      std::lock_guard lock(mu_);
      nodes_.erase(name);
    }
    hub_.RemoveApiNode(name);
    return;
  }
  absl::StatusOr<api::Node> n = NodeFromObject(object);
  if (!n.ok()) {
    log_.Warn("Node ignored", {{"error", n.status().ToString()}});
    return;
  }
  {
    std::lock_guard lock(mu_);
    nodes_[name] = NodeMeta{name, StringAt(object, {"metadata", "uid"}), n->metadata.labels,
                            n->unschedulable, n->taints};
  }
  hub_.SetApiNode(*std::move(n));
}

void KubeSource::Absorb(const Value& object, ModuleChanges& changes) {
  ModuleMeta meta = ModuleMetaFromObject(object);
  const std::string key = meta.Key();
  const bool deleting = meta.deleting;
  {
    std::lock_guard lock(mu_);
    metas_[key] = meta;
  }
  if (deleting) {
    Forget(key, changes);
    return;
  }
  {
    std::lock_guard lock(mu_);
    auto it = planned_rv_.find(key);
    if (it != planned_rv_.end() && it->second == meta.resource_version) {
      return;
    }
  }
  std::vector<api::Diagnostic> errors;
  std::optional<api::Module> m = CheckModuleObject(object, errors);
  if (!m) {
    // The webhook refuses such Modules; one that got in keeps its last good version.
    const std::string first = errors.front().ToString();
    bool planned = false;
    bool changed = false;
    {
      std::lock_guard lock(mu_);
      planned = planned_rv_.count(key) != 0;
      changed = SetRejectedLocked(key, std::move(errors));
    }
    if (changed) {
      log_.Error(planned ? "Module rejected; its last accepted version stays in force"
                 : meta.HasUnloadFinalizer()
                     ? "Module rejected; an earlier run accepted it, so the nodes that run it "
                       "are sent nothing until it is fixed or deleted"
                     : "Module rejected; it is not planned on any node until fixed",
                 {{"error", first}});
    }
    return;
  }
  std::lock_guard lock(mu_);
  (void)SetRejectedLocked(key, {});
  planned_rv_[key] = meta.resource_version;
  if (m->spec.image_repo_secret && !m->spec.image_repo_secret->name.empty()) {
    secret_of_[key] = absl::StrCat(m->metadata.namespace_, "/", m->spec.image_repo_secret->name);
  } else {
    secret_of_.erase(key);
  }
  changes.set.push_back(*std::move(m));
}

void KubeSource::Forget(const std::string& key, ModuleChanges& changes) {
  std::lock_guard lock(mu_);
  if (planned_rv_.erase(key) > 0) {
    changes.removed.push_back(key);
  }
  secret_of_.erase(key);
  (void)SetRejectedLocked(key, {});  // the spec of a Module being deleted no longer matters
}

bool KubeSource::SetRejectedLocked(const std::string& key, std::vector<api::Diagnostic> errors) {
  auto it = rejected_.find(key);
  if (errors.empty()) {
    if (it == rejected_.end()) {
      return false;
    }
    rejected_.erase(it);
  } else {
    auto text = [](const std::vector<api::Diagnostic>& list) {
      std::string out;
      for (const auto& d : list) {
        absl::StrAppend(&out, d.ToString(), "\n");
      }
      return out;
    };
    if (it != rejected_.end() && text(it->second) == text(errors)) {
      return false;
    }
    rejected_[key] = std::move(errors);
  }
  rejected_changed_ = true;
  return true;
}

std::set<std::string> KubeSource::HeldLocked() const {
  std::set<std::string> held;
  for (const auto& [key, errors] : rejected_) {
    auto meta = metas_.find(key);
    if (planned_rv_.count(key) == 0 && meta != metas_.end() && meta->second.HasUnloadFinalizer()) {
      held.insert(key);
    }
  }
  return held;
}

std::set<std::string> KubeSource::FinalizedLocked() const {
  std::set<std::string> out;
  for (const auto& [key, meta] : metas_) {
    if (meta.HasUnloadFinalizer()) {
      out.insert(out.end(), key);
    }
  }
  return out;
}

void KubeSource::Apply(ModuleChanges changes) {
  std::set<std::string> secrets;
  {
    std::lock_guard lock(mu_);
    for (const auto& m : changes.set) {
      if (auto it = secret_of_.find(m.Key()); it != secret_of_.end()) {
        secrets.insert(it->second);
      }
    }
  }
  for (const auto& key : secrets) {
    RefreshSecret(key);  // before the plan that needs it is pushed
  }
  SourceUpdate u;
  {
    std::lock_guard lock(mu_);
    u.module_count = planned_rv_.size();
    for (const auto& [key, errors] : rejected_) {
      u.errors.insert(u.errors.end(), errors.begin(), errors.end());
    }
    // Every rejected Module is named: the errors hold back only what `held` says.
    u.errors_hold_all = false;
    u.held = HeldLocked();
    held_sent_ = u.held;
    u.finalized = FinalizedLocked();
    finalized_sent_ = u.finalized;
    rejected_changed_ = false;
  }
  u.changes.push_back(std::move(changes));
  hub_.ApplySource(u);
}

void KubeSource::RefreshSecret(const std::string& key) {
  const size_t slash = key.find('/');
  absl::StatusOr<Value> s = client_.Get(
      kube::ResourcePath("v1", "secrets", key.substr(0, slash), key.substr(slash + 1)));
  absl::StatusOr<std::string> config =
      s.ok() ? DockerConfigFromSecret(*s) : absl::StatusOr<std::string>(s.status());
  std::optional<server::PullSecretState> state =
      config.ok() ? std::optional(server::PullSecretState{true, "", ""})
                  : PullSecretProblem(key, config.status());
  bool report = true;
  {
    std::lock_guard lock(mu_);
    SecretCheck& check = secret_checks_[key];
    check.next = clock_.MonotonicNow() +
                 (state && state->readable ? std::chrono::duration_cast<std::chrono::seconds>(
                                                 kSecretRefresh)
                                           : kMissingSecretRecheck);
    if (state) {
      report = check.state != state;
      check.state = state;
      check.transient.clear();
    } else {
      report = check.transient != config.status().message();
      check.transient = std::string(config.status().message());
    }
  }
  if (!config.ok()) {
    if (report) {  // once per change: a missing Secret is looked up every few seconds
      log_.Warn("pull secret unreadable; nodes are sent the Module without it",
                {{"secret", key}, {"error", config.status().ToString()}});
    }
    if (state && state->reason != "Forbidden") {
      hub_.SetPullSecret(key, std::nullopt);
    }
  } else {
    if (report) {
      log_.Info("pull secret read", {{"secret", key}});
    }
    hub_.SetPullSecret(key, *std::move(config));
  }
  if (state) {
    hub_.SetPullSecretState(key, *std::move(state));
  }  // on a transient error the last copy and state stay
}

void KubeSource::OnModuleSync(const std::vector<Value>& objects) {
  ModuleChanges changes;
  std::set<std::string> seen;
  for (const Value& o : objects) {
    seen.insert(ModuleMetaFromObject(o).Key());
    Absorb(o, changes);
  }
  std::vector<std::string> gone;
  {
    std::lock_guard lock(mu_);
    for (auto it = metas_.begin(); it != metas_.end();) {
      if (seen.count(it->first) == 0) {
        gone.push_back(it->first);
        it = metas_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& key : gone) {
    Forget(key, changes);
  }
  Apply(std::move(changes));
  if (!modules_synced_.exchange(true)) {
    log_.Info("Modules listed", {{"modules", static_cast<int64_t>(objects.size())}});
  }
}

void KubeSource::OnModuleEvent(kube::EventType type, const Value& object) {
  ModuleChanges changes;
  if (type == kube::EventType::kDeleted) {
    const std::string key = ModuleMetaFromObject(object).Key();
    {
      std::lock_guard lock(mu_);
      metas_.erase(key);
    }
    Forget(key, changes);
  } else {
    Absorb(object, changes);
  }
  bool tell_hub = false;
  {
    std::lock_guard lock(mu_);
    // Its finalizer may have been removed by hand: that releases the nodes it held. A
    // finalizer added, or gone with its Module, changes what nodes may report.
    tell_hub = rejected_changed_ || HeldLocked() != held_sent_ ||
               FinalizedLocked() != finalized_sent_;
  }
  if (!changes.empty() || tell_hub) {
    Apply(std::move(changes));
  }
}

std::vector<ModuleMeta> KubeSource::Modules() {
  std::lock_guard lock(mu_);
  std::vector<ModuleMeta> out;
  out.reserve(metas_.size());
  for (const auto& [key, m] : metas_) {
    out.push_back(m);
    out.back().planned = planned_rv_.count(key) != 0;
  }
  return out;
}

std::optional<ModuleMeta> KubeSource::Module(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = metas_.find(key);
  if (it == metas_.end()) {
    return std::nullopt;
  }
  ModuleMeta out = it->second;
  out.planned = planned_rv_.count(key) != 0;
  return out;
}

std::optional<NodeMeta> KubeSource::Node(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    return std::nullopt;
  }
  return it->second;
}

}  // namespace kmodd::source

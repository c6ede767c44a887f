#include "controller/source/kube_source.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "controller/api/decode.h"
#include "controller/api/validate.h"
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

absl::StatusOr<api::Module> ModuleFromObject(const Value& object) {
  const std::string name = ObjectName(object);
  api::Decoded d = api::DecodeDocuments(AsDocument(object, kModulesGroupVersion, "Module"),
                                        absl::StrCat("Module ", name));
  if (!d.errors.empty() || d.modules.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Module ", name, ": ",
                     d.errors.empty() ? std::string("not decoded") : d.errors.front().message));
  }
  api::Module m = std::move(d.modules.front().object);
  std::vector<api::FieldError> errors = api::ValidateModule(m);
  if (!errors.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Module ", name, ": ", errors.front().path, ": ", errors.front().message));
  }
  return m;
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

absl::StatusOr<std::string> DockerConfigFromSecret(const Value& secret) {
  const std::string encoded = StringAt(secret, {"data", ".dockerconfigjson"});
  if (encoded.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Secret ", ObjectName(secret),
                     " has no .dockerconfigjson (type kubernetes.io/dockerconfigjson expected)"));
  }
  std::string out;
  if (!absl::Base64Unescape(encoded, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Secret ", ObjectName(secret), ": .dockerconfigjson is not base64"));
  }
  return out;
}

KubeSource::KubeSource(kube::KubeClient& client, server::Hub& hub, Logger& log)
    : client_(client), hub_(hub), log_(log) {}

KubeSource::~KubeSource() { Stop(); }

void KubeSource::Start() {
  nodes_thread_ = std::thread([this] { RunNodes(); });
  modules_thread_ = std::thread([this] { RunModules(); });
  secrets_thread_ = std::thread([this] { RunSecrets(); });
}

void KubeSource::Stop() {
  stop_.Cancel();
  for (std::thread* t : {&nodes_thread_, &modules_thread_, &secrets_thread_}) {
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
       [this](const absl::Status& e) { LogWatchError("Nodes", e); }});
  lw.Run(stop_);
}

void KubeSource::RunModules() {
  // The first plan must see every Node: wait for their list.
  while (!nodes_synced_.load()) {
    if (stop_.WaitFor(std::chrono::milliseconds(20))) {
      return;
    }
  }
  kube::ListWatchOptions o;
  o.path = kube::ResourcePath(kModulesGroupVersion, "modules");
  kube::ListWatch lw(
      client_, o,
      {[this](const std::vector<Value>& objects) { OnModuleSync(objects); },
       [this](kube::EventType t, const Value& object) { OnModuleEvent(t, object); },
       [this](const absl::Status& e) { LogWatchError("Modules", e); }});
  lw.Run(stop_);
}

void KubeSource::RunSecrets() {
  while (!stop_.WaitFor(kSecretRefresh)) {
    std::set<std::string> keys;
    {
      std::lock_guard lock(mu_);
      for (const auto& [module, secret] : secret_of_) {
        keys.insert(secret);
      }
    }
    for (const std::string& key : keys) {
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
    nodes_[name] = NodeMeta{name, StringAt(object, {"metadata", "uid"}), n->metadata.labels};
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
  absl::StatusOr<api::Module> m = ModuleFromObject(object);
  if (!m.ok()) {
    // The webhook refuses such Modules; one that got in keeps its last good version.
    log_.Error("Module rejected; its last accepted version stays in force",
               {{"error", m.status().ToString()}});
    return;
  }
  std::lock_guard lock(mu_);
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
  if (!config.ok()) {
    log_.Warn("pull secret unreadable; nodes are sent the Module without it",
              {{"secret", key}, {"error", config.status().ToString()}});
    if (absl::IsNotFound(config.status()) || absl::IsFailedPrecondition(config.status()) ||
        absl::IsInvalidArgument(config.status())) {
      hub_.SetPullSecret(key, std::nullopt);
    }
    return;  // on a transient error the last copy stays
  }
  hub_.SetPullSecret(key, *std::move(config));
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
  if (!changes.empty()) {
    Apply(std::move(changes));
  }
}

std::vector<ModuleMeta> KubeSource::Modules() {
  std::lock_guard lock(mu_);
  std::vector<ModuleMeta> out;
  out.reserve(metas_.size());
  for (const auto& [key, m] : metas_) {
    out.push_back(m);
  }
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

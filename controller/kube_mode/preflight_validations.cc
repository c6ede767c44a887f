#include "controller/kube_mode/preflight_validations.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "controller/kube/list_watch.h"
#include "controller/kube/time_format.h"
#include "controller/kube_mode/kube_source.h"
#include "controller/kube_mode/pull_secret.h"

namespace kmodd::source {

namespace {

constexpr size_t kMaxKernelBytes = 256;
constexpr char kModulesGroupVersionV1beta1[] = "kmm.sigs.x-k8s.io/v1beta1";

bool KernelChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_' || c == '+' || c == ',';
}

std::string Key(const preflight::Result& r) { return r.module; }

}  // namespace

absl::StatusOr<PreflightRequest> ParsePreflightValidation(const Value& object) {
  PreflightRequest r;
  const Value* name = Lookup(object, {"metadata", "name"});
  if (name == nullptr || !name->IsString() || name->AsString().empty()) {
    return absl::InvalidArgumentError("PreflightValidation: metadata.name: missing");
  }
  r.name = name->AsString();
  const std::string what = absl::StrCat("PreflightValidation ", r.name, ": ");
  if (const Value* g = Lookup(object, {"metadata", "generation"}); g != nullptr && g->IsInt()) {
    r.generation = g->AsInt();
  }
  const Value* kernel = Lookup(object, {"spec", "kernelVersion"});
  if (kernel == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(what, "spec.kernelVersion: missing; set the kernel the "
                                                         "fleet moves to, as `uname -r` prints it"));
  }
  if (!kernel->IsString()) {
    return absl::InvalidArgumentError(absl::StrCat(what, "spec.kernelVersion: expected a string, got ",
                                                   JsonTypeName(*kernel)));
  }
  r.kernel = kernel->AsString();
  if (r.kernel.empty() || r.kernel.size() > kMaxKernelBytes ||
      !std::all_of(r.kernel.begin(), r.kernel.end(), KernelChar)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, "spec.kernelVersion: \"", r.kernel.substr(0, 80),
        "\" is not a kernel release (letters, digits, '.', ',', '-', '_', '+'; at most 256 bytes)"));
  }
  // As KMM's webhook: at least three parts on '.', ',' or '-' (6.1.0, not 6.1).
  if (std::count_if(r.kernel.begin(), r.kernel.end(), [](char c) { return c == '.' || c == ',' || c == '-'; }) < 2) {
    return absl::InvalidArgumentError(absl::StrCat(what, "spec.kernelVersion: \"", r.kernel,
                                                   "\" has fewer than three parts (as 6.1.0-27-cloud-amd64)"));
  }
  if (const Value* push = Lookup(object, {"spec", "pushBuiltImage"}); push != nullptr) {
    if (!push->IsBool()) {
      return absl::InvalidArgumentError(absl::StrCat(what, "spec.pushBuiltImage: expected a boolean, got ",
                                                     JsonTypeName(*push)));
    }
    r.push_built_image = push->AsBool();
  }
  return r;
}

Value PreflightStatus(const std::vector<preflight::Result>& results, const Value* previous,
                      const std::string& now, bool in_progress) {
  std::map<std::string, const Value*> before;
  if (previous != nullptr) {
    if (const Value* list = previous->Find("modules"); list != nullptr && list->IsList()) {
      for (const Value& m : list->AsList()) {
        before[absl::StrCat(StringAt(m, {"namespace"}), "/", StringAt(m, {"name"}))] = &m;
      }
    }
  }
  std::vector<const preflight::Result*> sorted;
  sorted.reserve(results.size());
  for (const preflight::Result& r : results) {
    sorted.push_back(&r);
  }
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return Key(*a) < Key(*b); });
  Value modules = Value::EmptyList();
  for (const preflight::Result* r : sorted) {
    const size_t slash = r->module.find('/');
    // KMM's stages are Image and Done: kmodd's own (Mapping, Image, Content) go in front of
    // the reason, so that what reads KMM's status reads kmodd's.
    const std::string status = in_progress ? "InProgress" : (r->success ? "Success" : "Failure");
    const std::string stage = !in_progress && r->success ? "Done" : "Image";
    const std::string reason = in_progress ? "being checked" : absl::StrCat(r->stage, ": ", r->reason);
    std::string since = now;
    if (auto it = before.find(r->module); it != before.end()) {
      const Value& b = *it->second;
      if (StringAt(b, {"verificationStatus"}) == status && StringAt(b, {"verificationStage"}) == stage &&
          StringAt(b, {"statusReason"}) == reason && !StringAt(b, {"lastTransitionTime"}).empty()) {
        since = StringAt(b, {"lastTransitionTime"});
      }
    }
    Value m = Value::EmptyMap();
    m.Set("namespace", r->module.substr(0, slash));
    m.Set("name", r->module.substr(slash + 1));
    m.Set("verificationStatus", status);
    m.Set("verificationStage", stage);
    m.Set("statusReason", reason);
    m.Set("lastTransitionTime", since);
    modules.Append(std::move(m));
  }
  Value out = Value::EmptyMap();
  out.Set("modules", std::move(modules));
  return out;
}

PreflightValidations::PreflightValidations(kube::KubeClient& client, const Clock& clock, Logger& log,
                                           std::function<bool()> is_leader, std::string ca_file)
    : client_(client), clock_(clock), log_(log), is_leader_(std::move(is_leader)), ca_file_(std::move(ca_file)) {}

PreflightValidations::~PreflightValidations() { Stop(); }

void PreflightValidations::Start() {
  watch_ = std::thread([this] { Watch(); });
  work_ = std::thread([this] { Work(); });
}

void PreflightValidations::Stop() {
  stop_.Cancel();
  {
    std::lock_guard lock(mu_);
    cv_.notify_all();
  }
  if (watch_.joinable()) {
    watch_.join();
  }
  if (work_.joinable()) {
    work_.join();
  }
}

void PreflightValidations::Watch() {
  auto offer = [this](const Value& object) {
    absl::StatusOr<PreflightRequest> req = ParsePreflightValidation(object);
    if (!req.ok()) {
      log_.Warn("PreflightValidation ignored", {{"problem", std::string(req.status().message())}});
      return;
    }
    std::lock_guard lock(mu_);
    // Checked, or being checked (its own status writes come back as events): not again.
    if (auto d = done_.find(req->name); d != done_.end() && d->second == req->generation) {
      return;
    }
    auto queued = std::find_if(queue_.begin(), queue_.end(), [&](const auto& q) { return q.name == req->name; });
    if (queued != queue_.end()) {
      *queued = *req;
    } else {
      queue_.push_back(*req);
    }
    cv_.notify_all();
  };
  kube::ListWatchOptions o;
  o.path = kube::ResourcePath(kPreflightGroupVersion, "preflightvalidations");
  kube::ListWatch lw(
      client_, o,
      {[offer](const std::vector<Value>& objects) {
         for (const Value& object : objects) {
           offer(object);
         }
       },
       [this, offer](kube::EventType t, const Value& object) {
         if (t == kube::EventType::kDeleted) {
           std::lock_guard lock(mu_);
           done_.erase(StringAt(object, {"metadata", "name"}));
           return;
         }
         offer(object);
       },
       [this, told = false](const absl::Status& e) mutable {
         if (!told && (absl::IsNotFound(e) || absl::IsPermissionDenied(e))) {
           told = true;
           log_.Warn("PreflightValidations cannot be listed: apply "
                     "deploy/crd/kmm.sigs.x-k8s.io_preflightvalidations.yaml and grant list and watch "
                     "on them (deploy/)",
                     {{"error", e.ToString()}});
         }
       }},
      clock_);
  lw.Run(stop_);
}

void PreflightValidations::Work() {
  while (true) {
    PreflightRequest req;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stop_.cancelled() || !queue_.empty(); });
      if (stop_.cancelled()) {
        return;
      }
      req = queue_.front();
      queue_.pop_front();
      done_[req.name] = req.generation;  // from now: a new generation queues a new check
    }
    if (!is_leader_()) {
      // A follower writes nothing; the object waits for this replica to lead.
      if (stop_.WaitFor(std::chrono::seconds(2), clock_)) {
        return;
      }
      std::lock_guard lock(mu_);
      done_.erase(req.name);
      queue_.push_back(req);
      continue;
    }
    Check(req);
  }
}

namespace {

// The .dockerconfigjson of the Module's imageRepoSecret ("" without one); `error` set when
// the Secret cannot be read or is not one a node could use.
std::string DockerConfig(kube::KubeClient& client, const api::Module& m, std::string* error) {
  if (!m.spec.image_repo_secret || m.spec.image_repo_secret->name.empty()) {
    return "";
  }
  const std::string name = m.spec.image_repo_secret->name;
  absl::StatusOr<Value> secret = client.Get(kube::ResourcePath("v1", "secrets", m.metadata.namespace_, name));
  absl::StatusOr<std::string> config =
      secret.ok() ? DockerConfigFromSecret(*secret) : absl::StatusOr<std::string>(secret.status());
  if (!config.ok()) {
    *error = absl::StrCat("spec.imageRepoSecret ", m.metadata.namespace_, "/", name, ": ",
                          config.status().message());
    return "";
  }
  return *config;
}

}  // namespace

absl::StatusOr<std::vector<preflight::Result>> PreflightClusterModules(
    kube::KubeClient& client, const preflight::Options& base,
    const std::function<void(const std::vector<preflight::Result>&)>& on_listed) {
  absl::StatusOr<kube::ObjectList> list =
      client.List(kube::ResourcePath(kModulesGroupVersionV1beta1, "modules"), {});
  if (!list.ok()) {
    return list.status();
  }
  std::vector<preflight::Result> results;
  std::vector<std::optional<api::Module>> modules;
  for (const Value& item : list->items) {
    preflight::Result r;
    r.module = absl::StrCat(StringAt(item, {"metadata", "namespace"}), "/", StringAt(item, {"metadata", "name"}));
    r.stage = "Mapping";
    absl::StatusOr<api::Module> m = ModuleFromObject(item);
    if (!m.ok()) {
      r.reason = absl::StrCat("the Module does not validate: ", m.status().message());
      modules.emplace_back(std::nullopt);
    } else {
      modules.emplace_back(std::move(*m));
    }
    results.push_back(std::move(r));
  }
  if (on_listed) {
    on_listed(results);
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (!modules[i]) {
      continue;
    }
    std::string error;
    preflight::Options options = base;
    options.docker_config = DockerConfig(client, *modules[i], &error);
    if (!error.empty()) {
      results[i].stage = "Image";
      results[i].reason = error;
      continue;
    }
    results[i] = std::move(preflight::Preflight({*modules[i]}, options).front());
  }
  return results;
}

void PreflightValidations::Check(const PreflightRequest& req) {
  const std::string path = kube::ResourcePath(kPreflightGroupVersion, "preflightvalidations", "", req.name);
  log_.Info("preflight started", {{"preflightValidation", req.name}, {"kernel", req.kernel}});
  auto write = [&](const std::vector<preflight::Result>& results, bool in_progress) {
    absl::StatusOr<Value> current = client_.Get(path);
    if (!current.ok()) {
      return current.status();  // deleted meanwhile: nothing to write
    }
    const Value* previous = current->Find("status");
    const std::string now = kube::FormatKubeTime(clock_.Now());
    return kube::UpdateStatus(client_, path, PreflightStatus(results, previous, now, in_progress)).status();
  };
  preflight::Options options;
  options.kernel = req.kernel;
  options.ca_file = ca_file_;
  absl::Status listed_write;
  absl::StatusOr<std::vector<preflight::Result>> results = PreflightClusterModules(
      client_, options, [&](const std::vector<preflight::Result>& listed) { listed_write = write(listed, true); });
  if (!results.ok()) {
    log_.Warn("preflight: cannot list Modules", {{"preflightValidation", req.name}, {"error", results.status().ToString()}});
    return;
  }
  if (!listed_write.ok()) {  // the verdicts are written all the same, below
    log_.Warn("preflight: cannot write InProgress", {{"preflightValidation", req.name}, {"error", listed_write.ToString()}});
  }
  if (absl::Status s = write(*results, false); !s.ok()) {
    log_.Warn("preflight: cannot write status", {{"preflightValidation", req.name}, {"error", s.ToString()}});
    return;
  }
  int64_t ok = 0;
  for (const preflight::Result& r : *results) {
    ok += r.success ? 1 : 0;
  }
  log_.Info("preflight done", {{"preflightValidation", req.name},
                               {"kernel", req.kernel},
                               {"modules", static_cast<int64_t>(results->size())},
                               {"success", ok}});
}

}  // namespace kmodd::source

// `kmodd-controller rollout status|pause|resume|undo NAMESPACE/NAME`: a Module's rollout
// (issue 15), as kubectl's `rollout` does for a Deployment.
//
// status reads the Module's status.rollout: from the status file the running controller
// writes (standalone), or from the API server (--kubernetes). pause, resume and undo change
// the Module's ModulePolicy where it lives: in standalone mode its document in the modules
// directory (rewritten atomically; the running controller sees the change as any edit), in
// Kubernetes mode the object (a merge patch, as the user running the command). pause sets spec.paused; resume clears it and approves the
// canaries of the Module's current revision (annotation kmodd.io/resumed-revision); undo
// sends the nodes of the current revision back to what they ran before it (annotation
// kmodd.io/undo-revision) until the Module changes again.

#include <chrono>
#include <functional>
#include <filesystem>
#include <optional>
#include <ostream>
#include <thread>

#include <yaml-cpp/yaml.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/decode.h"
#include "common/file.h"
#include "common/flags.h"
#include "common/value.h"
#include "common/clock.h"
#include "common/json.h"
#include "controller/cli/commands.h"
#include "controller/cli/inputs.h"
#include "controller/cli/output.h"
#include "controller/kube/config.h"
#include "controller/kube/rest_client.h"
#include "controller/kube_mode/kube_source.h"
#include "controller/server/status.h"
#include "controller/source/dir_source.h"

namespace kmodd::cli {

namespace {

constexpr char kUsage[] =
    "usage: kmodd-controller rollout status NAMESPACE/NAME [--status-file FILE] [--wait SECONDS]\n"
    "       kmodd-controller rollout pause|resume|undo NAMESPACE/NAME --modules-dir DIR\n"
    "       kmodd-controller rollout ACTION NAMESPACE/NAME --kubernetes [--kubeconfig FILE]\n";

// The Module's status.rollout in a status document; nullptr when the Module or its
// rollout is not there.
const Value* FindRollout(const Value& doc, const std::string& key, bool& module_found) {
  module_found = false;
  const Value* modules = doc.Find("modules");
  if (modules == nullptr || !modules->IsList()) {
    return nullptr;
  }
  for (const Value& m : modules->AsList()) {
    if (absl::StrCat(ScalarText(m.Find("namespace")), "/", ScalarText(m.Find("name"))) != key) {
      continue;
    }
    module_found = true;
    const Value* status = m.Find("status");
    return status == nullptr ? nullptr : status->Find("rollout");
  }
  return nullptr;
}

std::string Describe(const std::string& key, const Value& r) {
  std::string out = absl::StrCat("Module ", key, ": rollout of revision ", ScalarText(r.Find("revision")),
                                 " (ModulePolicy ", ScalarText(r.Find("policy")), ")\n");
  absl::StrAppend(&out, "phase:    ", ScalarText(r.Find("phase")), ": ", ScalarText(r.Find("message")), "\n");
  absl::StrAppend(&out, "nodes:    ", ScalarText(r.Find("nodes")), " selected, ", ScalarText(r.Find("updated")),
                  " updated, ", ScalarText(r.Find("ready")), " Ready, ", ScalarText(r.Find("updating")),
                  " updating, ", ScalarText(r.Find("failed")), " Failed, ", ScalarText(r.Find("waiting")),
                  " waiting, ", ScalarText(r.Find("rolledBack")), " rolled back\n");
  auto list = [&](const char* field, const char* title) {
    const Value* v = r.Find(field);
    if (v == nullptr || !v->IsList() || v->AsList().empty()) {
      return;
    }
    std::vector<std::string> items;
    for (const Value& i : v->AsList()) {
      items.push_back(ScalarText(&i));
    }
    absl::StrAppend(&out, title, absl::StrJoin(items, field == std::string("canaries") ? ", " : "\n          "),
                    "\n");
  };
  list("canaries", "canaries: ");
  list("failedNodes", "failed:   ");
  return out;
}

// Reads the Module's status.rollout now: the Value (null when the Module has none), or an
// error to print.
using RolloutReader = std::function<absl::StatusOr<Value>()>;

RolloutReader FileReader(const std::string& key, const std::string& path) {
  return [key, path]() -> absl::StatusOr<Value> {
    absl::StatusOr<std::string> text = ReadFile(path);
    if (!text.ok()) {
      return absl::NotFoundError(absl::StrCat(
          text.status().message(), "\n(is `kmodd-controller run` running with this --status-file?)"));
    }
    absl::StatusOr<Value> doc = server::ParseStatusDocument(*text);
    if (!doc.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", doc.status().message()));
    }
    bool found = false;
    const Value* r = FindRollout(*doc, key, found);
    if (!found) {
      return absl::NotFoundError(absl::StrCat("no Module ", key, " in ", path));
    }
    return r == nullptr ? Value() : *r;
  };
}

RolloutReader ApiReader(kube::KubeClient& client, const std::string& ns, const std::string& name) {
  return [&client, ns, name]() -> absl::StatusOr<Value> {
    absl::StatusOr<Value> m = client.Get(source::ModuleObjectPath(ns, name));
    if (!m.ok()) {
      return m.status();
    }
    const Value* r = Lookup(*m, {"status", "rollout"});
    return r == nullptr ? Value() : *r;
  };
}

int Status(const std::string& key, const RolloutReader& read, int wait_s, std::ostream& out,
           std::ostream& err) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_s);
  std::string last;
  for (;;) {
    absl::StatusOr<Value> rollout = read();
    if (!rollout.ok()) {
      err << "error: " << rollout.status().message() << "\n";
      return 1;
    }
    const Value* r = rollout->IsNull() ? nullptr : &*rollout;
    if (r == nullptr) {
      err << "error: Module " << key
          << " has no ModulePolicy: it reaches every selected node at once (no rollout)\n";
      return 1;
    }
    const std::string phase = ScalarText(r->Find("phase"));
    const std::string text_now = Describe(key, *r);
    const bool settled = phase == "Complete" || phase == "Halted" || phase == "Undone";
    if (wait_s <= 0 || settled || std::chrono::steady_clock::now() >= deadline) {
      out << text_now;
      if (wait_s > 0 && !settled) {
        err << "error: the rollout did not finish within " << wait_s << " s\n";
        return 1;
      }
      return wait_s > 0 && phase != "Complete" ? 1 : 0;
    }
    if (text_now != last) {
      out << text_now << std::flush;
      last = text_now;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

// Where the ModulePolicy of Module `key` is, and the Module's revision.
struct Found {
  std::string file;
  std::string policy_name;
  std::string ns;
  std::string revision;
};

absl::StatusOr<Found> FindPolicy(const std::string& dir, const std::string& key) {
  std::error_code ec;
  std::optional<std::vector<std::string>> files = source::ListManifests(dir, ec);
  if (!files) {
    return absl::InvalidArgumentError(absl::StrCat("--modules-dir ", dir, ": ", ec.message()));
  }
  Found f;
  bool module = false;
  for (const std::string& file : *files) {
    absl::StatusOr<std::string> text = ReadFile(file);
    if (!text.ok()) {
      return text.status();
    }
    api::Decoded d = api::DecodeDocuments(*text, file);
    for (const auto& m : d.modules) {
      if (m.object.Key() == key) {
        module = true;
        f.revision = m.object.revision;
      }
    }
    for (const auto& p : d.policies) {
      if (p.object.ModuleKey() == key && f.file.empty()) {
        f.file = file;
        f.policy_name = p.object.metadata.name;
        f.ns = p.object.metadata.namespace_;
      }
    }
  }
  if (!module) {
    return absl::NotFoundError(absl::StrCat("no Module ", key, " in ", dir,
                                            " (or its manifest does not validate: "
                                            "`kmodd-controller validate` says why)"));
  }
  if (f.file.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "Module ", key, " has no ModulePolicy in ", dir,
        ": add one (kind ModulePolicy, apiVersion kmodd.io/v1alpha1, spec.moduleName) to pace "
        "its rollouts"));
  }
  return f;
}

// Whether the text has a YAML comment that rewriting would lose (a '#' at the start of a
// line or after a blank; a '#' inside a quoted value counts too, on the safe side).
bool HasComment(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t' || text[i - 1] == '\n')) {
      return true;
    }
  }
  return false;
}

int Change(const std::string& action, const std::string& key, const std::string& dir,
           std::ostream& out, std::ostream& err) {
  absl::StatusOr<Found> f = FindPolicy(dir, key);
  if (!f.ok()) {
    err << "error: " << f.status().message() << "\n";
    return 1;
  }
  if (absl::EndsWith(f->file, ".json")) {
    err << "error: " << f->file << " is JSON, which this command does not rewrite: set "
        << (action == "pause" ? "spec.paused: true" : action == "resume"
                ? "spec.paused: false and annotation kmodd.io/resumed-revision: " + f->revision
                : "annotation kmodd.io/undo-revision: " + f->revision)
        << " in it yourself\n";
    return 1;
  }
  absl::StatusOr<std::string> text = ReadFile(f->file);
  if (!text.ok()) {
    err << "error: " << text.status().message() << "\n";
    return 1;
  }
  if (HasComment(*text)) {
    err << "error: " << f->file << " has comments, which rewriting it would lose: move the "
        << "ModulePolicy to a file of its own, or set "
        << (action == "pause" ? "spec.paused: true" : action == "resume"
                ? "spec.paused: false and annotation kmodd.io/resumed-revision: " + f->revision
                : "annotation kmodd.io/undo-revision: " + f->revision)
        << " in it yourself\n";
    return 1;
  }
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(*text);
  } catch (const YAML::Exception& e) {
    err << "error: " << f->file << ": " << e.what() << "\n";
    return 1;
  }
  bool changed = false;
  for (YAML::Node& doc : docs) {
    if (!doc.IsMap()) {
      continue;
    }
    const YAML::Node& c = doc;
    if (!c["kind"] || c["kind"].as<std::string>("") != "ModulePolicy" || !c["metadata"] ||
        c["metadata"]["name"].as<std::string>("") != f->policy_name ||
        c["metadata"]["namespace"].as<std::string>("default") != f->ns) {
      continue;
    }
    if (!c["spec"] || !c["spec"].IsMap()) {
      continue;
    }
    YAML::Node spec = doc["spec"];
    YAML::Node meta = doc["metadata"];
    if (action == "pause") {
      spec["paused"] = true;
    } else if (action == "resume") {
      spec["paused"] = false;
      meta["annotations"][api::kResumedRevisionAnnotation] = f->revision;
    } else {
      meta["annotations"][api::kUndoRevisionAnnotation] = f->revision;
    }
    changed = true;
    break;
  }
  if (!changed) {
    err << "error: " << f->file << ": the ModulePolicy document was not found again\n";
    return 1;
  }
  std::string content;
  for (size_t i = 0; i < docs.size(); ++i) {
    YAML::Emitter e;
    e << docs[i];
    if (i > 0) {
      content += "---\n";
    }
    absl::StrAppend(&content, e.c_str(), "\n");
  }
  if (absl::Status st = WriteFileAtomic(f->file, content); !st.ok()) {
    err << "error: " << st.message() << "\n";
    return 1;
  }
  const char* what = action == "pause"    ? "paused"
                     : action == "resume" ? "resumed"
                                          : "undone: its nodes go back to what they ran before it";
  out << "Module " << key << ": rollout of revision " << f->revision << " " << what
      << " (ModulePolicy " << f->ns << "/" << f->policy_name << " in " << f->file << ")\n";
  return 0;
}

// Kubernetes mode: the ModulePolicy object naming the Module, patched.
int ChangeInApi(kube::KubeClient& client, const std::string& action, const std::string& ns,
                const std::string& name, std::ostream& out, std::ostream& err) {
  const std::string key = absl::StrCat(ns, "/", name);
  absl::StatusOr<Value> object = client.Get(source::ModuleObjectPath(ns, name));
  if (!object.ok()) {
    err << "error: Module " << key << ": " << object.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<api::Module> module = source::ModuleFromObject(*object);
  if (!module.ok()) {
    err << "error: " << module.status().message() << "\n";
    return 1;
  }
  const std::string collection = kube::ResourcePath(api::kKmoddGroupVersion, "modulepolicies", ns);
  absl::StatusOr<kube::ObjectList> list = client.List(collection, {});
  if (!list.ok()) {
    err << "error: ModulePolicies in " << ns << ": " << list.status().message() << "\n";
    return 1;
  }
  std::string policy;
  for (const Value& p : list->items) {
    const std::string pname = StringAt(p, {"metadata", "name"});
    if (StringAt(p, {"spec", "moduleName"}) == name && (policy.empty() || pname < policy)) {
      policy = pname;  // the one that governs it (module_policies.h)
    }
  }
  if (policy.empty()) {
    err << "error: Module " << key << " has no ModulePolicy in namespace " << ns
        << ": create one (kind ModulePolicy, apiVersion kmodd.io/v1alpha1, spec.moduleName: "
        << name << ") to pace its rollouts\n";
    return 1;
  }
  Value patch = Value::EmptyMap();
  Value annotations = Value::EmptyMap();
  if (action == "pause" || action == "resume") {
    patch.Set("spec", Value(Value::Map{{"paused", action == "pause"}}));
  }
  if (action == "resume") {
    annotations.Set(api::kResumedRevisionAnnotation, module->revision);
  } else if (action == "undo") {
    annotations.Set(api::kUndoRevisionAnnotation, module->revision);
  }
  if (!annotations.AsMap().empty()) {
    patch.Set("metadata", Value(Value::Map{{"annotations", std::move(annotations)}}));
  }
  absl::StatusOr<Value> patched =
      client.MergePatch(kube::ResourcePath(api::kKmoddGroupVersion, "modulepolicies", ns, policy), patch);
  if (!patched.ok()) {
    err << "error: ModulePolicy " << ns << "/" << policy << ": " << patched.status().message() << "\n";
    return 1;
  }
  const char* what = action == "pause"    ? "paused"
                     : action == "resume" ? "resumed"
                                          : "undone: its nodes go back to what they ran before it";
  out << "Module " << key << ": rollout of revision " << module->revision << " " << what
      << " (ModulePolicy " << ns << "/" << policy << ")\n";
  return 0;
}

}  // namespace

int RolloutCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string action;
  std::string key;
  std::string dir;
  std::string status_file = "/var/lib/kmodd/controller-status.yaml";
  int wait_s = 0;
  bool kubernetes = false;
  std::string kubeconfig;
  flags::FlagSet flags("kmodd-controller rollout", kUsage);
  flags.Positional("ACTION", "status, pause, resume or undo", &action);
  flags.Positional("NAMESPACE/NAME", "the Module", &key);
  flags.String("--modules-dir", "DIR", "pause, resume, undo: the directory `run` reads", &dir);
  flags.String("--status-file", "FILE",
               "status: what `run` writes (default /var/lib/kmodd/controller-status.yaml)",
               &status_file);
  flags.Int("--wait", "SECONDS",
            "status: wait until the rollout is Complete (exit 0), Halted or Undone (exit 1), "
            "at most this long",
            &wait_s);
  flags.Switch("--kubernetes", "the Module and its ModulePolicy in the API server", &kubernetes);
  flags.String("--kubeconfig", "FILE",
               "with --kubernetes: the client configuration (default: in-cluster)", &kubeconfig);
  if (std::optional<int> exit = flags.ParseOrExit(args, out, err)) {
    return *exit;
  }
  if (key.find('/') == std::string::npos || key.front() == '/' || key.back() == '/') {
    err << "error: \"" << key << "\": give the Module as NAMESPACE/NAME\n" << kUsage;
    return 2;
  }
  if (action != "status" && action != "pause" && action != "resume" && action != "undo") {
    err << "error: \"" << action << "\": expected status, pause, resume or undo\n" << kUsage;
    return 2;
  }
  if (kubernetes) {
    RealClock clock;
    absl::StatusOr<std::unique_ptr<kube::RestKubeClient>> client = KubeClientFor(kubeconfig, clock);
    if (!client.ok()) {
      err << "error: " << client.status().message() << "\n";
      return 1;
    }
    const std::string ns = key.substr(0, key.find('/'));
    const std::string name = key.substr(key.find('/') + 1);
    if (action == "status") {
      return Status(key, ApiReader(**client, ns, name), wait_s, out, err);
    }
    return ChangeInApi(**client, action, ns, name, out, err);
  }
  if (action == "status") {
    return Status(key, FileReader(key, status_file), wait_s, out, err);
  }
  if (dir.empty()) {
    err << "error: " << action << " needs --modules-dir (the directory `run` reads)\n" << kUsage;
    return 2;
  }
  return Change(action, key, dir, out, err);
}

}  // namespace kmodd::cli

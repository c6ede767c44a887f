#include "controller/server/status.h"

#include <algorithm>
#include <ctime>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <yaml-cpp/yaml.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "controller/placement/selection.h"

namespace kmodd::server {

namespace {

const NodeRecord* FindNode(const std::vector<const NodeRecord*>& nodes, const std::string& name) {
  auto it = std::lower_bound(nodes.begin(), nodes.end(), name,
                             [](const NodeRecord* n, const std::string& k) { return n->name < k; });
  return it != nodes.end() && (*it)->name == name ? *it : nullptr;
}

const ReportedModule* FindReported(const NodeRecord* n, const std::string& key) {
  if (n == nullptr) {
    return nullptr;
  }
  auto it = std::lower_bound(n->modules.begin(), n->modules.end(), key,
                             [](const ReportedModule& m, const std::string& k) { return m.key < k; });
  return it != n->modules.end() && it->key == key ? &*it : nullptr;
}

// The row of a node planned to run a Module.
NodeModuleStatus DesiredRow(const std::string& node, const NodeRecord* rec,
                            const ReportedModule* rm, const placement::DesiredModule& dm) {
  NodeModuleStatus row{node, api::Phase::kPending, "", "", 0, rec != nullptr && rec->connected};
  if (rm != nullptr) {
    row.phase = rm->phase;
    row.message = rm->message;
    row.image_digest = rm->image_digest;
    row.since_unix_ms = rm->since_unix_ms;
  } else if (row.connected) {
    row.message = "waiting for the agent's report";
  }
  if (!row.connected) {
    if (rm == nullptr) {
      row.phase = api::Phase::kUnknown;
    }
    row.message = rm != nullptr && !rm->message.empty()
                      ? absl::StrCat("agent disconnected; last report: ", rm->message)
                      : std::string("agent disconnected");
  }
  if (dm.held) {
    row.message = absl::StrCat(row.message, row.message.empty() ? "" : "; ", "held at version ",
                               dm.config->version, " by the node's version label");
  }
  return row;
}

bool Available(const NodeModuleStatus& row, const ReportedModule* rm,
               const placement::DesiredModule& dm) {
  return row.connected && rm != nullptr && rm->phase == api::Phase::kLoaded &&
         (dm.config->version.empty() || rm->version == dm.config->version);
}

std::vector<Condition> Conditions(const ModuleState& m) {
  const auto& c = m.module_loader;
  Condition available{"Available", "False", "", ""};
  if (c.desired_number == 0) {
    available.reason = "NoTargetNodes";
    available.message = "no node is planned to run it";
  } else {
    available.status = c.available_number == c.desired_number ? "True" : "False";
    available.reason = c.available_number == c.desired_number ? "AllNodesLoaded" : "NodesNotLoaded";
    available.message =
        absl::StrCat(c.available_number, " of ", c.desired_number, " nodes have it loaded");
  }
  Condition degraded{"Degraded", "False", "AsExpected", ""};
  int failed = 0;
  for (const auto& row : m.nodes) {
    if (!row.skipped && row.phase == api::Phase::kFailed) {
      if (failed++ == 0) {
        degraded.message = absl::StrCat(row.node, ": ", row.message);
      }
    }
  }
  if (failed > 0) {
    degraded.status = "True";
    degraded.reason = "LoadFailed";
    if (failed > 1) {
      degraded.message = absl::StrCat(failed, " nodes failed; first ", degraded.message);
    }
  }
  return {available, degraded};
}

// "Module <namespace>/<name>" -> "<namespace>/<name>"; "" for any other object.
std::string ModuleKeyOf(const api::Diagnostic& d) {
  constexpr char kModule[] = "Module ";
  return absl::StartsWith(d.object, kModule) ? d.object.substr(sizeof(kModule) - 1) : "";
}

// What the nodes follow while a Module is rejected.
enum class Rejected {
  kInForce,  // its last accepted spec
  kHeld,     // accepted by an earlier run, spec unknown: the nodes that run it wait
  kNone,     // never accepted: nothing
};

Condition AcceptedCondition(const std::vector<const api::Diagnostic*>& errors, Rejected what) {
  if (errors.empty()) {
    return {"Accepted", "True", "Valid", "the spec passed validation"};
  }
  std::string problems;
  for (const api::Diagnostic* d : errors) {
    absl::StrAppend(&problems, problems.empty() ? "" : "; ", d->path, d->path.empty() ? "" : ": ",
                    d->message);
  }
  // Which spec the nodes follow is what the owner needs to know next.
  switch (what) {
    case Rejected::kInForce:
      absl::StrAppend(&problems, "; the last accepted spec stays in force until this is fixed");
      break;
    case Rejected::kHeld:
      absl::StrAppend(&problems,
                      "; an earlier controller run accepted it and its spec is not known: the "
                      "nodes that run it are sent nothing (they keep what they run) until this "
                      "is fixed or the Module is deleted");
      break;
    case Rejected::kNone:
      absl::StrAppend(&problems, "; not planned on any node until this is fixed");
      break;
  }
  return {"Accepted", "False", "Invalid", problems};
}

std::optional<Condition> PullSecretCondition(
    const api::Module& m, const std::map<std::string, PullSecretState>& secrets) {
  if (!m.spec.image_repo_secret || m.spec.image_repo_secret->name.empty()) {
    return std::nullopt;
  }
  const std::string key = absl::StrCat(m.metadata.namespace_, "/", m.spec.image_repo_secret->name);
  auto it = secrets.find(key);
  if (it == secrets.end()) {
    return std::nullopt;  // not looked up (standalone mode, or not yet)
  }
  if (it->second.readable) {
    return Condition{"PullSecretResolved", "True", "Found",
                     absl::StrCat("Secret ", key, " read; its credentials go to the nodes")};
  }
  return Condition{"PullSecretResolved", "False", it->second.reason, it->second.message};
}

// KMM's status.devicePlugin and status.dra: the nodes its Pods may be scheduled on (both
// nodesMatchingSelectorNumber and desiredNumber, as KMM), and the nodes where one is Ready
// (KMM sums the DaemonSets' numberAvailable: the same count, minReadySeconds being 0).
void PluginCounters(const api::Module& m, const StatusInput& in, ModuleState& st) {
  const bool plugin = m.spec.device_plugin.has_value();
  const bool dra = m.spec.dra.has_value();
  if (!plugin && !dra) {
    return;
  }
  api::DaemonSetStatus c;
  for (const auto& p : in.plans) {
    if (placement::PodSchedulable(m, p.node->metadata.labels, p.node->unschedulable,
                                  p.node->taints)) {
      ++c.nodes_matching_selector_number;
      ++c.desired_number;
    }
  }
  api::DaemonSetStatus d = c;
  if (in.plugin_pods != nullptr) {
    for (const auto& [node, pods] : *in.plugin_pods) {
      auto it = pods.find(m.Key());
      if (it != pods.end()) {
        c.available_number += it->second.device_plugin_ready ? 1 : 0;
        d.available_number += it->second.dra_ready ? 1 : 0;
      }
    }
  }
  if (plugin) {
    st.device_plugin = c;
  }
  if (dra) {
    st.dra = d;
  }
}

}  // namespace

ControllerStatus Aggregate(const StatusInput& in) {
  ControllerStatus out;
  out.run_id = in.run_id;
  out.generated_unix_ms = in.now_unix_ms;
  out.serving = in.serving;
  out.active = in.active;
  out.errors = in.errors;
  std::map<std::string, std::vector<const api::Diagnostic*>> rejected;  // by Module key
  for (const api::Diagnostic& d : in.errors) {
    if (std::string key = ModuleKeyOf(d); !key.empty()) {
      rejected[key].push_back(&d);
    }
  }
  std::map<std::string, size_t> index;
  for (const api::Module* m : in.modules) {
    index.emplace(m->Key(), out.modules.size());
    ModuleState st;
    st.namespace_ = m->metadata.namespace_;
    st.name = m->metadata.name;
    out.modules.push_back(std::move(st));
  }
  for (const auto& p : in.plans) {
    const std::string& node = p.node->metadata.name;
    const NodeRecord* rec = FindNode(in.nodes, node);
    std::set<std::string> planned;
    for (const auto& dm : p.modules) {
      const std::string key = dm.module->Key();
      planned.insert(key);
      ModuleState& st = out.modules[index.at(key)];
      const ReportedModule* rm = FindReported(rec, key);
      NodeModuleStatus row = DesiredRow(node, rec, rm, dm);
      ++st.module_loader.nodes_matching_selector_number;
      ++st.module_loader.desired_number;
      if (Available(row, rm, dm)) {
        ++st.module_loader.available_number;
      }
      st.nodes.push_back(std::move(row));
    }
    for (const auto& s : p.skipped) {
      if (s.reason == placement::SkipReason::kSelector || s.reason == placement::SkipReason::kNoModuleLoader) {
        continue;
      }
      ModuleState& st = out.modules[index.at(s.module->Key())];
      // As KMM, the nodes the Module may run on: not one a NoExecute taint takes out (its
      // row still says why). Without a mapping or version label it is still wanted there.
      if (s.reason != placement::SkipReason::kTaint) {
        ++st.module_loader.nodes_matching_selector_number;
      }
      st.nodes.push_back(NodeModuleStatus{
          node, api::Phase::kUnknown, placement::DescribeSkip(*s.module, *p.node, s.reason, s.detail),
          "", 0, rec != nullptr && rec->connected, /*skipped=*/true});
    }
    if (rec == nullptr) {
      continue;
    }
    // Reported but not planned here: being unloaded, or kept by a disconnected agent.
    for (const auto& rm : rec->modules) {
      auto it = index.find(rm.key);
      if (it == index.end() || planned.count(rm.key) != 0) {
        continue;
      }
      ModuleState& st = out.modules[it->second];
      const bool skipped_row = !st.nodes.empty() && st.nodes.back().node == node;
      NodeModuleStatus row{node,           rm.phase,         rm.message,
                           rm.image_digest, rm.since_unix_ms, rec->connected};
      if (skipped_row) {
        st.nodes.back() = std::move(row);  // what the node does says more than why
      } else {
        st.nodes.push_back(std::move(row));
      }
    }
  }
  for (const api::Module* m : in.modules) {
    ModuleState& st = out.modules[index.at(m->Key())];
    PluginCounters(*m, in, st);
    st.conditions = Conditions(st);
    auto r = rejected.find(m->Key());
    st.conditions.push_back(
        AcceptedCondition(r != rejected.end() ? r->second : std::vector<const api::Diagnostic*>{},
                          Rejected::kInForce));
    if (std::optional<Condition> c = PullSecretCondition(*m, in.pull_secrets)) {
      st.conditions.push_back(*std::move(c));
    }
    if (auto ro = in.rollouts.find(m->Key()); ro != in.rollouts.end()) {
      st.rollout = ro->second;
    }
  }
  // A Module never accepted has no plan, but its owner still needs to read why: it is
  // listed with zero counts.
  for (const auto& [key, errors] : rejected) {
    const size_t slash = key.find('/');
    if (index.count(key) != 0 || slash == std::string::npos) {
      continue;
    }
    ModuleState st;
    st.namespace_ = key.substr(0, slash);
    st.name = key.substr(slash + 1);
    st.conditions = Conditions(st);
    st.conditions.push_back(
        AcceptedCondition(errors, in.held.count(key) != 0 ? Rejected::kHeld : Rejected::kNone));
    out.modules.push_back(std::move(st));
  }
  std::sort(out.modules.begin(), out.modules.end(), [](const ModuleState& a, const ModuleState& b) {
    return absl::StrCat(a.namespace_, "/", a.name) < absl::StrCat(b.namespace_, "/", b.name);
  });
  out.nodes.reserve(in.nodes.size());
  for (const NodeRecord* n : in.nodes) {
    out.nodes.push_back(*n);
  }
  return out;
}

const char* RowPhase(const NodeModuleStatus& row) {
  return row.skipped ? "Skipped" : api::PhaseName(row.phase);
}

std::string Rfc3339(int64_t unix_ms) {
  if (unix_ms <= 0) {
    return "";
  }
  return Rfc3339Millis(unix_ms);
}

namespace {

void SetIf(Value& v, const char* key, const std::string& s) {
  if (!s.empty()) {
    v.Set(key, s);
  }
}

Value NodeValue(const NodeRecord& n) {
  Value v = Value::EmptyMap();
  v.Set("name", n.name);
  v.Set("connected", n.connected);
  SetIf(v, "since", Rfc3339(n.since_unix_ms));
  SetIf(v, "kernelRelease", n.kernel_release);
  SetIf(v, "bootID", n.boot_id);
  SetIf(v, "agentVersion", n.agent_version);
  SetIf(v, "pushedVersion", n.pushed_version);
  SetIf(v, "ackedVersion", n.acked_version);
  SetIf(v, "appliedVersion", n.applied_version);
  if (!n.nacked_version.empty()) {
    v.Set("nack", Value::Map{{"version", n.nacked_version}, {"error", n.nack_error}});
  }
  v.Set("modules", static_cast<int64_t>(n.modules.size()));
  if (n.ignored_modules > 0) {
    v.Set("ignoredModules", static_cast<int64_t>(n.ignored_modules));
  }
  return v;
}

}  // namespace

Value ModuleStatusValue(const ModuleState& m) {
  auto counters = [](const api::DaemonSetStatus& c) {
    Value v = Value::EmptyMap();
    v.Set("nodesMatchingSelectorNumber", c.nodes_matching_selector_number);
    v.Set("desiredNumber", c.desired_number);
    v.Set("availableNumber", c.available_number);
    return v;
  };
  Value conditions = Value::EmptyList();
  for (const auto& c : m.conditions) {
    conditions.Append(Value::Map{
        {"type", c.type}, {"status", c.status}, {"reason", c.reason}, {"message", c.message}});
  }
  Value nodes = Value::EmptyList();
  for (const auto& r : m.nodes) {
    Value row = Value::EmptyMap();
    row.Set("node", r.node);
    row.Set("phase", RowPhase(r));
    row.Set("message", r.message);
    SetIf(row, "imageDigest", r.image_digest);
    SetIf(row, "since", Rfc3339(r.since_unix_ms));
    if (!r.connected) {
      row.Set("connected", false);
    }
    nodes.Append(std::move(row));
  }
  Value status = Value::EmptyMap();
  status.Set("moduleLoader", counters(m.module_loader));
  if (m.device_plugin) {
    status.Set("devicePlugin", counters(*m.device_plugin));
  }
  if (m.dra) {
    status.Set("dra", counters(*m.dra));
  }
  status.Set("conditions", std::move(conditions));
  status.Set("nodes", std::move(nodes));
  if (m.rollout) {
    status.Set("rollout", RolloutValue(*m.rollout));
  }
  return status;
}

Value RolloutValue(const RolloutState& r) {
  Value v = Value::EmptyMap();
  v.Set("policy", r.policy);
  v.Set("revision", r.revision);
  v.Set("phase", r.phase);
  v.Set("message", r.message);
  v.Set("nodes", r.nodes);
  v.Set("updated", r.updated);
  v.Set("updating", r.updating);
  v.Set("ready", r.ready);
  v.Set("failed", r.failed);
  v.Set("waiting", r.waiting);
  v.Set("rolledBack", r.rolled_back);
  if (!r.canaries.empty()) {
    Value c = Value::EmptyList();
    for (const auto& n : r.canaries) {
      c.Append(Value(n));
    }
    v.Set("canaries", std::move(c));
  }
  if (!r.failed_nodes.empty()) {
    Value f = Value::EmptyList();
    for (const auto& n : r.failed_nodes) {
      f.Append(Value(n));
    }
    v.Set("failedNodes", std::move(f));
  }
  return v;
}

namespace {

Value ModuleValue(const ModuleState& m) {
  Value v = Value::EmptyMap();
  v.Set("namespace", m.namespace_);
  v.Set("name", m.name);
  v.Set("status", ModuleStatusValue(m));
  return v;
}

Value ErrorValue(const api::Diagnostic& d) {
  Value v = Value::EmptyMap();
  SetIf(v, "file", d.source);  // none for a Module read from the API server
  if (d.line > 0) {
    v.Set("line", d.line);
  }
  SetIf(v, "object", d.object);
  SetIf(v, "field", d.path);
  v.Set("message", d.message);
  return v;
}

Value FromYaml(const YAML::Node& n) {
  if (n.IsMap()) {
    Value v = Value::EmptyMap();
    for (const auto& kv : n) {
      v.Set(kv.first.as<std::string>(), FromYaml(kv.second));
    }
    return v;
  }
  if (n.IsSequence()) {
    Value v = Value::EmptyList();
    for (const auto& item : n) {
      v.Append(FromYaml(item));
    }
    return v;
  }
  if (!n.IsScalar()) {
    return nullptr;
  }
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") {  // quoted: a string whatever it looks like
    return s;
  }
  if (s == "true" || s == "false") {
    return s == "true";
  }
  if (s == "null" || s == "~") {
    return nullptr;
  }
  int64_t i = 0;
  if (absl::SimpleAtoi(s, &i)) {
    return i;
  }
  return s;
}

}  // namespace

Value ToValue(const ControllerStatus& s) {
  Value v = Value::EmptyMap();
  v.Set("kind", "ControllerStatus");
  v.Set("runID", s.run_id);
  v.Set("generatedAt", Rfc3339(s.generated_unix_ms));
  // Written only when false: a follower replica, or nothing sent yet (rejected Modules).
  if (!s.active) {
    v.Set("active", false);
  }
  if (!s.serving) {
    v.Set("serving", false);
  }
  Value modules = Value::EmptyList();
  for (const auto& m : s.modules) {
    modules.Append(ModuleValue(m));
  }
  v.Set("modules", std::move(modules));
  Value nodes = Value::EmptyList();
  for (const auto& n : s.nodes) {
    nodes.Append(NodeValue(n));
  }
  v.Set("nodes", std::move(nodes));
  Value errors = Value::EmptyList();
  for (const auto& e : s.errors) {
    errors.Append(ErrorValue(e));
  }
  v.Set("errors", std::move(errors));
  return v;
}

absl::StatusOr<Value> ParseStatusDocument(std::string_view text) {
  try {
    YAML::Node doc = YAML::Load(std::string(text));
    if (!doc.IsMap()) {
      return absl::InvalidArgumentError("not a kmodd controller status document");
    }
    return FromYaml(doc);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("not a status document: ", e.what()));
  }
}

}  // namespace kmodd::server

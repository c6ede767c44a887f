#include "node-agent/server/pass_planner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kmodd::agent {

namespace {

std::string SecretFor(const api::NodeModuleSpec& spec,
                      const std::map<std::string, std::string>& secrets) {
  if (!spec.image_repo_secret) {
    return "";
  }
  auto it = secrets.find(spec.namespace_ + "/" + spec.image_repo_secret->name);
  return it != secrets.end() ? it->second : "";
}

}  // namespace

bool FailStatic::Allows(const reconcile::Action& a) const {
  if (authoritative) {
    return true;
  }
  switch (a.kind) {
    case reconcile::Action::Kind::kReloadInTree:
      return false;
    case reconcile::Action::Kind::kUnload:
      return !Keeps(a.key);
    case reconcile::Action::Kind::kLoad:
      return true;
  }
  return true;
}

PassPlan PlanPass(const FailStatic& fail_static,
                  const std::vector<reconcile::DesiredModule>& prepared,
                  const kernel::KernelState& observed, const reconcile::Journal& journal) {
  PassPlan plan;
  for (auto& a : reconcile::PlanActions(prepared, observed, journal)) {
    if (fail_static.Allows(a)) {
      plan.actions.push_back(std::move(a));
    }
  }
  for (const auto& d : prepared) {
    if (!d.problem.ok()) {
      plan.problems.push_back(absl::StrCat(d.key, ": ", d.problem.message()));
    }
  }
  return plan;
}

void PassPlanner::SetDesired(DesiredState d) {
  desired_ = std::move(d);
  load_overrides_.clear();
  unload_overrides_.clear();
  gates_.ClearInTree();
}

std::string PassPlanner::OverrideLoad(api::NodeModuleSpec spec) {
  const std::string key = spec.Key();
  gates_.Clear(key);
  unload_overrides_.erase(key);
  load_overrides_[key] = std::move(spec);
  return absl::StrCat("override: ", key,
                      " will be loaded from this spec; the next desired state from the "
                      "controller replaces the override");
}

std::string PassPlanner::OverrideUnload(const std::string& key) {
  gates_.Clear(key);
  load_overrides_.erase(key);
  unload_overrides_.insert(key);
  return absl::StrCat("override: ", key,
                      " will be unloaded (only what kmodd loaded); the next desired state from "
                      "the controller replaces the override");
}

PassPlanner::Summary PassPlanner::Describe() const {
  Summary s;
  for (const auto& [key, spec] : load_overrides_) {
    s.overrides.push_back(key + " (load)");
  }
  for (const auto& key : unload_overrides_) {
    s.overrides.push_back(key + " (unload)");
  }
  if (desired_) {
    s.version = desired_->version;
    s.source = desired_->source;
  } else if (!s.overrides.empty()) {
    s.source = "override";
  }
  return s;
}

PassInputs PassPlanner::TakeInputs() {
  PassInputs in;
  in.fail_static.authoritative = desired_.has_value();
  in.fail_static.unload_overrides = unload_overrides_;
  std::vector<api::NodeModuleSpec> modules;
  static const std::map<std::string, std::string> kNoSecrets;
  const std::map<std::string, std::string>& secrets =
      desired_ ? desired_->pull_secrets : kNoSecrets;
  if (desired_) {
    in.version = desired_->version;
    modules = desired_->modules;
  }
  for (const auto& entry : load_overrides_) {
    const std::string& key = entry.first;  // a named variable: lambdas cannot capture bindings
    auto it = std::find_if(modules.begin(), modules.end(),
                           [&key](const api::NodeModuleSpec& m) { return m.Key() == key; });
    if (it != modules.end()) {
      *it = entry.second;
    } else {
      modules.push_back(entry.second);
    }
  }
  for (auto& spec : modules) {
    if (unload_overrides_.count(spec.Key()) != 0) {
      continue;
    }
    gates_.ForgetChanged(spec);  // a new spec for a Module starts its retries afresh
    std::string secret = SecretFor(spec, secrets);
    in.modules.push_back(PassModule{std::move(spec), std::move(secret)});
  }
  return in;
}

void PassPlanner::RecordResult(const std::string& key, const absl::Status& s, Time now,
                               double unit, bool in_tree) {
  std::optional<api::NodeModuleSpec> spec;
  if (desired_) {
    for (const auto& m : desired_->modules) {
      if (m.Key() == key) {
        spec = m;
      }
    }
  }
  if (auto o = load_overrides_.find(key); o != load_overrides_.end()) {
    spec = o->second;
  }
  gates_.Record(key, s, now, unit, spec, in_tree);
}

}  // namespace kmodd::agent

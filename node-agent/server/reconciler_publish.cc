// Reconciler::Publish: what the last pass saw and did, as one status row per Module for
// AgentState (and so for agentctl and the controller's report). Apart from reconciler.cc
// to keep that file about the pass itself.

#include "node-agent/server/reconciler.h"

namespace kmodd::server {

namespace {

ModulePhase FromJournal(reconcile::Phase p) {
  switch (p) {
    case reconcile::Phase::kLoaded:
      return ModulePhase::kLoaded;
    case reconcile::Phase::kUnloading:
      return ModulePhase::kUnloading;
    case reconcile::Phase::kFailed:
      return ModulePhase::kFailed;
    case reconcile::Phase::kLoading:
      return ModulePhase::kPending;
  }
  return ModulePhase::kPending;
}

}  // namespace

void Reconciler::Publish(const Inputs& in, const std::vector<reconcile::DesiredModule>& prepared,
                         const std::set<std::string>& pulling,
                         const kernel::KernelState* observed) {
  std::vector<ModuleStatus> out;
  std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mu_);
  auto facts_for = [&](const std::string& key) {
    ModuleFacts f;
    if (auto j = journal_.modules.find(key); j != journal_.modules.end()) {
      f.journal = &j->second;
    }
    if (auto e = last_error_.find(key); e != last_error_.end()) {
      f.last_error = e->second;
    }
    if (auto g = gates_.find(key); g != gates_.end()) {
      f.retry_scheduled = !g->second.terminal;
    }
    if (acting_ && acting_->first == key) {
      f.acting = acting_->second;
    }
    return f;
  };
  auto fill = [&](ModuleStatus& st, const std::string& key) {
    st.key = key;
    st.namespace_ = key.substr(0, key.find('/'));
    st.name = key.substr(key.find('/') + 1);
    st.desired_version = in.version;
    if (auto j = journal_.modules.find(key); j != journal_.modules.end()) {
      st.kernel_modules = j->second.loaded;
      st.firmware = j->second.firmware;
    }
    if (auto w = warnings_.find(key); w != warnings_.end()) {
      st.warnings = w->second;
    }
  };
  for (size_t i = 0; i < in.modules.size() && i < prepared.size(); ++i) {
    const api::NodeModuleSpec& spec = in.modules[i];
    const reconcile::DesiredModule& d = prepared[i];
    ModuleFacts f = facts_for(d.key);
    f.desired = true;
    f.pulling = pulling.count(d.key) != 0;
    if (!f.pulling) {
      f.problem = d.problem;
    }
    f.converged = d.problem.ok() && reconcile::Converged(d, *observed, journal_);
    if (auto r = resolved_.find(d.key); f.problem.ok() && r != resolved_.end() && !r->second.root.ok() &&
                                        r->second.spec == spec) {
      f.problem = r->second.root.status();
    }
    const DerivedPhase p = DerivePhase(f);
    ModuleStatus st;
    fill(st, d.key);
    st.phase = p.phase;
    st.message = p.message;
    st.error_class = p.error_class;
    st.image = spec.config.container_image;
    if (auto r = resolved_.find(d.key);
        r != resolved_.end() && r->second.root.ok() && r->second.spec == spec) {
      st.image_digest = r->second.digest;
    }
    st.version = spec.version;
    out.push_back(std::move(st));
    seen.insert(d.key);
  }
  for (const auto& [key, entry] : journal_.modules) {
    if (seen.count(key) != 0) {
      continue;
    }
    ModuleStatus st;
    fill(st, key);
    st.image = entry.source;
    if (!in.authoritative && in.unload_overrides.count(key) == 0) {
      // Kept as the journal has it until a desired state arrives.
      st.phase = FromJournal(entry.phase);
      st.message = entry.phase == reconcile::Phase::kFailed
                       ? entry.message
                       : "no desired state yet: kept as the journal has it";
    } else {
      const DerivedPhase p = DerivePhase(facts_for(key));
      st.phase = p.phase;
      st.message = p.message;
      st.error_class = p.error_class;
    }
    out.push_back(std::move(st));
  }
  state_.SetModules(std::move(out));
}

}  // namespace kmodd::server

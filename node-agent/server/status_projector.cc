#include "node-agent/server/status_projector.h"

#include <set>

#include "node-agent/reconcile/action_planner.h"

namespace kmodd::agent {

namespace {

// A journal's Loading is work left half done: no action runs on it now, so it waits.
api::Phase FromJournal(api::Phase p) {
  return p == api::Phase::kLoading ? api::Phase::kPending : p;
}

const reconcile::JournalEntry* JournalOf(const StatusContext& ctx, const std::string& key) {
  auto j = ctx.journal->modules.find(key);
  return j == ctx.journal->modules.end() ? nullptr : &j->second;
}

// What the pass knows of Module `key` besides its preparation.
ModuleFacts FactsFor(const StatusContext& ctx, const std::string& key) {
  ModuleFacts f;
  f.journal = JournalOf(ctx, key);
  f.last_error = ctx.retries->LastError(key);
  f.retry_scheduled = ctx.retries->RetryScheduled(key);
  if (ctx.acting && ctx.acting->first == key) {
    f.acting = ctx.acting->second;
  }
  return f;
}

// The row's identity and what the journal and the firmware check say of it.
ModuleStatus Row(const StatusContext& ctx, const std::string& key) {
  ModuleStatus st;
  st.key = key;
  st.namespace_ = key.substr(0, key.find('/'));
  st.name = key.substr(key.find('/') + 1);
  st.desired_version = ctx.desired_version;
  if (const reconcile::JournalEntry* j = JournalOf(ctx, key)) {
    st.kernel_modules = j->loaded;
    st.firmware = j->firmware;
  }
  if (ctx.warnings != nullptr) {
    if (auto w = ctx.warnings->find(key); w != ctx.warnings->end()) {
      st.warnings = w->second;
    }
  }
  return st;
}

void SetPhase(ModuleStatus& st, const DerivedPhase& p) {
  st.phase = p.phase;
  st.message = p.message;
  st.error_class = p.error_class;
}

}  // namespace

std::vector<ModuleStatus> ProjectStatus(const std::vector<PreparedModule>& modules,
                                        const StatusContext& ctx) {
  std::vector<ModuleStatus> out;
  std::set<std::string> seen;
  for (const PreparedModule& m : modules) {
    const reconcile::DesiredModule& d = m.prepared;
    const auto image = ctx.images.find(d.key);
    ModuleFacts f = FactsFor(ctx, d.key);
    f.desired = true;
    f.pulling = m.pulling;
    if (!f.pulling) {
      f.problem = d.problem;
    }
    f.converged = d.problem.ok() && reconcile::Converged(d, *ctx.observed, *ctx.journal);
    if (f.problem.ok() && image != ctx.images.end() && !image->second.error.ok()) {
      f.problem = image->second.error;
    }
    ModuleStatus st = Row(ctx, d.key);
    SetPhase(st, DerivePhase(f));
    st.image = m.input.spec.config.container_image;
    if (image != ctx.images.end() && image->second.error.ok()) {
      st.image_digest = image->second.digest;
    }
    st.version = m.input.spec.version;
    out.push_back(std::move(st));
    seen.insert(d.key);
  }
  for (const auto& [key, entry] : ctx.journal->modules) {
    if (seen.count(key) != 0) {
      continue;
    }
    ModuleStatus st = Row(ctx, key);
    st.image = entry.source;
    if (ctx.fail_static.Keeps(key)) {
      st.phase = FromJournal(entry.phase);
      st.message = entry.phase == api::Phase::kFailed
                       ? entry.message
                       : "no desired state yet: kept as the journal has it";
    } else {
      SetPhase(st, DerivePhase(FactsFor(ctx, key)));
    }
    out.push_back(std::move(st));
  }
  return out;
}

}  // namespace kmodd::agent

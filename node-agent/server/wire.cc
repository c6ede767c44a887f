#include "node-agent/server/wire.h"

#include "proto/convert.h"

namespace kmodd::agent {

v1::NodeInfo ToProto(const NodeFacts& f) {
  v1::NodeInfo n;
  n.set_name(f.name);
  for (const auto& [k, v] : f.labels) {
    (*n.mutable_labels())[k] = v;
  }
  n.set_kernel_release(f.kernel_release);
  n.set_boot_id(f.boot_id);
  n.set_architecture(f.architecture);
  n.set_lockdown(f.lockdown);
  n.set_module_sig_enforce(f.module_sig_enforce);
  n.set_agent_version(f.agent_version);
  n.set_os_image(f.os_image);
  return n;
}

v1::ErrorClass ToProto(ErrorClass c) {
  switch (c) {
    case ErrorClass::kNone:
      return v1::ERROR_NONE;
    case ErrorClass::kRetry:
      return v1::ERROR_RETRY;
    case ErrorClass::kWait:
      return v1::ERROR_WAIT;
    case ErrorClass::kTerminal:
      return v1::ERROR_TERMINAL;
  }
  return v1::ERROR_NONE;
}

v1::ModuleStatus ToProto(const ModuleStatus& s) {
  v1::ModuleStatus m;
  m.set_namespace_(s.namespace_);
  m.set_name(s.name);
  m.set_phase(proto::ToProto(s.phase));
  m.set_message(s.message);
  m.set_error_class(ToProto(s.error_class));
  m.set_image(s.image);
  m.set_image_digest(s.image_digest);
  m.set_version(s.version);
  for (const auto& k : s.kernel_modules) {
    m.add_kernel_modules(k);
  }
  for (const auto& f : s.firmware) {
    m.add_firmware(f);
  }
  for (const auto& w : s.warnings) {
    m.add_warnings(w);
  }
  m.set_since_unix_ms(s.since_unix_ms);
  m.set_updated_unix_ms(s.updated_unix_ms);
  m.set_pull_bytes_done(s.pull_bytes_done);
  m.set_pull_bytes_total(s.pull_bytes_total);
  m.set_desired_version(s.desired_version);
  for (const auto& c : s.checks) {
    v1::CheckResult* r = m.add_checks();
    r->set_name(c.name);
    r->set_state(c.state);
    r->set_message(c.message);
  }
  return m;
}

v1::Event ToProto(const AgentEvent& e) {
  v1::Event out;
  out.set_unix_ms(e.unix_ms);
  out.set_kind(e.kind);
  out.set_module(e.module);
  out.set_message(e.message);
  if (e.phase) {
    out.set_phase(proto::ToProto(*e.phase));
  }
  out.set_bytes_done(e.bytes_done);
  out.set_bytes_total(e.bytes_total);
  return out;
}

v1::NodeReport Report(const AgentSnapshot& s) {
  v1::NodeReport r;
  for (const auto& m : s.modules) {
    *r.add_modules() = ToProto(m);
  }
  r.set_applied_version(s.desired_version);
  return r;
}

absl::StatusOr<DesiredState> FromProto(const v1::NodeDesired& d, const std::string& source) {
  auto modules = proto::FromProto(d);
  if (!modules.ok()) {
    return modules.status();
  }
  DesiredState out;
  out.version = d.version();
  out.source = source;
  out.modules = std::move(*modules);
  for (const auto& [k, v] : d.pull_secrets()) {
    out.pull_secrets[k] = v;
  }
  return out;
}

}  // namespace kmodd::agent

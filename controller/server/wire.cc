#include "controller/server/wire.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "api/node_modules_config.h"
#include "proto/convert.h"

namespace kmodd::server {

api::Node NodeFromInfo(const v1::NodeInfo& info) {
  api::Node n;
  n.metadata.name = info.name();
  n.metadata.namespace_.clear();  // Nodes are cluster-scoped
  n.metadata.labels.insert(info.labels().begin(), info.labels().end());
  n.node_info.kernel_version = info.kernel_release();
  n.node_info.boot_id = info.boot_id();
  n.node_info.architecture = info.architecture();
  n.node_info.os_image = info.os_image();
  return n;
}

v1::NodeDesired DesiredFromPlan(const plan::NodePlan& p, const std::string& version) {
  v1::NodeDesired out;
  out.set_version(version);
  for (const auto& dm : p.modules) {
    const api::Module& m = *dm.module;
    const plan::ResolvedConfig& c = *dm.config;
    api::NodeModuleSpec s;
    s.name = m.metadata.name;
    s.namespace_ = m.metadata.namespace_;
    s.image_repo_secret = m.spec.image_repo_secret;
    if (m.spec.module_loader) {
      s.service_account_name = m.spec.module_loader->EffectiveServiceAccountName();
    }
    s.tolerations = m.spec.tolerations;
    s.version = c.version;
    s.config.kernel_version = c.kernel_version;
    s.config.container_image = c.container_image;
    s.config.image_pull_policy = c.image_pull_policy;
    s.config.insecure_pull = c.InsecurePull();
    s.config.in_tree_modules_to_remove = c.in_tree_modules_to_remove;
    s.config.modprobe = c.modprobe;
    *out.add_modules() = proto::ToProto(s);
  }
  return out;
}

std::string PhaseName(v1::Phase p) {
  switch (p) {
    case v1::PENDING:
      return "Pending";
    case v1::PULLING:
      return "Pulling";
    case v1::LOADING:
      return "Loading";
    case v1::LOADED:
      return "Loaded";
    case v1::UNLOADING:
      return "Unloading";
    case v1::FAILED:
      return "Failed";
    default:
      return "Unknown";
  }
}

std::vector<ReportedModule> ReportedFromProto(
    const google::protobuf::RepeatedPtrField<v1::ModuleStatus>& modules) {
  std::vector<ReportedModule> out;
  out.reserve(static_cast<size_t>(modules.size()));
  for (const auto& m : modules) {
    out.push_back(ReportedModule{absl::StrCat(m.namespace_(), "/", m.name()), PhaseName(m.phase()),
                                 m.message(), m.image_digest(), m.version(), m.since_unix_ms()});
  }
  std::sort(out.begin(), out.end(),
            [](const ReportedModule& a, const ReportedModule& b) { return a.key < b.key; });
  return out;
}

}  // namespace kmodd::server

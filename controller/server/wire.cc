#include "controller/server/wire.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/names.h"
#include "api/node_modules_config.h"
#include "proto/convert.h"

namespace kmodd::server {

namespace {

// A Kubernetes object name: a DNS subdomain. Nodes and Modules alike.
constexpr size_t kMaxName = 253;
// A label key: an optional DNS subdomain prefix, '/', a name of at most 63 characters.
constexpr size_t kMaxLabelKey = 253 + 1 + 63;

}  // namespace

std::string Truncated(std::string_view s, size_t max) {
  if (s.size() <= max) {
    return std::string(s);
  }
  size_t cut = max;
  // Back to the start of a UTF-8 character: never half of one.
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  return absl::StrCat(std::string(s.substr(0, cut)), "... [truncated, ", s.size(),
                      " bytes in all]");
}

absl::Status CheckNodeInfo(const v1::NodeInfo& info, const ReportLimits& limits) {
  if (info.name().size() > kMaxName) {
    return absl::InvalidArgumentError(
        absl::StrCat("node.name has ", info.name().size(), " bytes; a node name is at most ",
                     kMaxName, " (a Kubernetes object name)"));
  }
  if (static_cast<size_t>(info.labels_size()) > limits.max_labels) {
    return absl::ResourceExhaustedError(
        absl::StrCat("node.labels has ", info.labels_size(), " labels, more than the ",
                     limits.max_labels, " a node may report; report refused"));
  }
  for (const auto& [key, value] : info.labels()) {
    if (key.size() > kMaxLabelKey || value.size() > limits.max_text) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node.labels[", api::Quote(Truncated(key, 80)), "]: a label key has at most ",
          kMaxLabelKey, " bytes and a value at most ", limits.max_text, "; report refused"));
    }
  }
  return absl::OkStatus();
}

api::Node NodeFromInfo(const v1::NodeInfo& info, const ReportLimits& limits) {
  api::Node n;
  n.metadata.name = info.name();
  n.metadata.namespace_.clear();  // Nodes are cluster-scoped
  n.metadata.labels.insert(info.labels().begin(), info.labels().end());
  n.node_info.kernel_version = Truncated(info.kernel_release(), limits.max_text);
  n.node_info.boot_id = Truncated(info.boot_id(), limits.max_text);
  n.node_info.architecture = Truncated(info.architecture(), limits.max_text);
  n.node_info.os_image = Truncated(info.os_image(), limits.max_text);
  return n;
}

v1::NodeDesired DesiredFromPlacement(const placement::NodePlacement& p, const std::string& version) {
  v1::NodeDesired out;
  out.set_version(version);
  for (const auto& dm : p.modules) {
    const api::Module& m = *dm.module;
    const placement::ResolvedConfig& c = *dm.config;
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

absl::StatusOr<ReportedModules> ReportedFromProto(
    const google::protobuf::RepeatedPtrField<v1::ModuleStatus>& modules,
    const ReportLimits& limits) {
  const size_t n = static_cast<size_t>(modules.size());
  if (n > limits.max_modules) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the report lists ", n, " modules, more than the ", limits.max_modules,
                     " a node may report; report refused and stream ended"));
  }
  ReportedModules out;
  out.modules.reserve(n);
  for (const auto& m : modules) {
    // Lengths first: the patterns then run on at most 253 bytes.
    if (!api::IsDnsLabel(m.namespace_()) || !api::IsDnsSubdomain(m.name())) {
      if (out.bad_names++ == 0) {
        out.first_bad_name = Truncated(absl::StrCat(m.namespace_(), "/", m.name()), 80);
      }
      continue;
    }
    out.modules.push_back(ReportedModule{
        absl::StrCat(m.namespace_(), "/", m.name()), proto::FromProto(m.phase()),
        Truncated(m.message(), limits.max_text), Truncated(m.image_digest(), limits.max_text),
        Truncated(m.version(), limits.max_text), m.since_unix_ms(),
        Truncated(m.image(), limits.max_text), Truncated(m.desired_version(), limits.max_text)});
  }
  // Stable: of two entries for one key, the first one listed is kept.
  std::stable_sort(out.modules.begin(), out.modules.end(),
                   [](const ReportedModule& a, const ReportedModule& b) { return a.key < b.key; });
  auto last = std::unique(out.modules.begin(), out.modules.end(),
                          [](const ReportedModule& a, const ReportedModule& b) {
                            return a.key == b.key;
                          });
  out.repeated = static_cast<size_t>(out.modules.end() - last);
  out.modules.erase(last, out.modules.end());
  return out;
}

}  // namespace kmodd::server

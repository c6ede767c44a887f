#include "controller/cli/output.h"

#include <algorithm>

#include "api/module_value.h"
#include "common/value_build.h"
#include "absl/strings/str_cat.h"
#include "common/table.h"

namespace kmodd::cli {

namespace {

Value ModprobeArgsValue(const api::ModprobeArgs& a) {
  Value v = Value::EmptyMap();
  if (!a.load.empty()) {
    v.Set("load", StringListValue(a.load));
  }
  if (!a.unload.empty()) {
    v.Set("unload", StringListValue(a.unload));
  }
  return v;
}

Value ModprobeValue(const api::ModprobeSpec& m) {
  Value v = Value::EmptyMap();
  if (!m.module_name.empty()) {
    v.Set("moduleName", m.module_name);
  }
  if (!m.parameters.empty()) {
    v.Set("parameters", StringListValue(m.parameters));
  }
  v.Set("dirName", m.dir_name);
  if (m.args) {
    v.Set("args", ModprobeArgsValue(*m.args));
  }
  if (m.raw_args) {
    v.Set("rawArgs", ModprobeArgsValue(*m.raw_args));
  }
  if (!m.firmware_path.empty()) {
    v.Set("firmwarePath", m.firmware_path);
  }
  if (m.modules_loading_order) {
    v.Set("modulesLoadingOrder", StringListValue(*m.modules_loading_order));
  }
  return v;
}

Value ModuleEntryValue(const placement::DesiredModule& dm) {
  const api::Module& m = *dm.module;
  const placement::ResolvedConfig& c = *dm.config;
  Value v = Value::EmptyMap();
  v.Set("name", m.metadata.name);
  v.Set("namespace", m.metadata.namespace_);
  if (m.spec.image_repo_secret) {
    v.Set("imageRepoSecret", Value::Map{{"name", m.spec.image_repo_secret->name}});
  }
  v.Set("serviceAccountName", m.spec.module_loader->EffectiveServiceAccountName());
  if (!m.spec.tolerations.empty()) {
    Value& tl = v.Set("tolerations", Value::EmptyList());
    for (const auto& t : m.spec.tolerations) {
      tl.Append(api::TolerationValue(t));
    }
  }
  if (!c.version.empty()) {
    v.Set("version", c.version);
  }
  Value config = Value::EmptyMap();
  config.Set("kernelVersion", c.kernel_version);
  config.Set("containerImage", c.container_image);
  config.Set("imagePullPolicy", c.image_pull_policy);
  config.Set("insecurePull", c.InsecurePull());
  if (!c.in_tree_modules_to_remove.empty()) {
    config.Set("inTreeModulesToRemove", StringListValue(c.in_tree_modules_to_remove));
  }
  config.Set("modprobe", ModprobeValue(c.modprobe));
  v.Set("config", std::move(config));
  return v;
}

}  // namespace

Value NodeModulesConfigValue(const placement::NodePlacement& p) {
  Value v = Value::EmptyMap();
  v.Set("apiVersion", api::kGroupVersion);
  v.Set("kind", "NodeModulesConfig");
  v.Set("metadata", Value::Map{{"name", p.node->metadata.name}});
  Value modules = Value::EmptyList();
  for (const auto& dm : p.modules) {
    modules.Append(ModuleEntryValue(dm));
  }
  v.Set("spec", Value::Map{{"modules", std::move(modules)}});
  return v;
}

Value PlacementListValue(const std::vector<placement::NodePlacement>& plans) {
  Value items = Value::EmptyList();
  for (const auto& p : plans) {
    if (!p.modules.empty()) {
      items.Append(NodeModulesConfigValue(p));
    }
  }
  Value v = Value::EmptyMap();
  v.Set("apiVersion", "v1");
  v.Set("kind", "List");
  v.Set("items", std::move(items));
  return v;
}

std::string PlacementTable(const std::vector<placement::NodePlacement>& plans) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"NODE", "KERNEL", "MODULE", "STATE", "VERSION", "IMAGE / REASON"});
  for (const auto& p : plans) {
    const std::string& node = p.node->metadata.name;
    const std::string& kernel = p.node->node_info.kernel_version;
    // Runs and skips are each sorted by module; print them merged in module order.
    size_t i = 0;
    size_t j = 0;
    while (i < p.modules.size() || j < p.skipped.size()) {
      const bool take_run =
          j >= p.skipped.size() ||
          (i < p.modules.size() && p.modules[i].module->Key() < p.skipped[j].module->Key());
      if (take_run) {
        const auto& dm = p.modules[i++];
        rows.push_back({node, kernel, dm.module->Key(), dm.held ? "held" : "run",
                        dm.config->version.empty() ? "-" : dm.config->version,
                        dm.config->container_image});
      } else {
        const auto& s = p.skipped[j++];
        rows.push_back({node, kernel, s.module->Key(), "skip", "-",
                        placement::DescribeSkip(*s.module, *p.node, s.reason, s.detail)});
      }
    }
    if (p.modules.empty() && p.skipped.empty()) {
      rows.push_back({node, kernel, "-", "-", "-", "no Modules"});
    }
  }
  return RenderTable(rows);
}

std::string ScalarText(const Value* v) {
  if (v == nullptr || v->IsNull()) {
    return "";
  }
  if (v->IsString()) {
    return v->AsString();
  }
  if (v->IsInt()) {
    return absl::StrCat(v->AsInt());
  }
  if (v->IsBool()) {
    return v->AsBool() ? "true" : "false";
  }
  return "?";
}

}  // namespace kmodd::cli

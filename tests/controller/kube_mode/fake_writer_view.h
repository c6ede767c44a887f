#pragma once

// A WriterView (controller/kube_mode/writer_view.h) the test fills in: the hub's records
// and Module status, and the API objects as a watch would have them.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "controller/kube_mode/writer_view.h"

namespace kmodd::testing {

struct FakeWriterView final : server::WriterView {
  std::map<std::string, server::NodeRecord> records;
  std::map<std::string, source::NodeMeta> nodes;
  std::map<std::string, server::ModuleState> modules;
  std::map<std::string, source::ModuleMeta> metas;
  std::map<std::string, api::Module> objects;
  std::vector<api::Module> plugin_modules;
  std::set<std::string> reported;
  bool pods_listed = true;  // false: PluginPods answers nullopt
  std::map<std::string, server::NodePluginPods> pods;
  std::map<std::string, std::set<std::string>> draining;

  std::optional<server::NodeRecord> Record(const std::string& node) const override {
    return Find(records, node);
  }
  std::optional<source::NodeMeta> ApiNode(const std::string& node) const override {
    return Find(nodes, node);
  }
  std::optional<server::ModuleState> ModuleStatus(const std::string& key) const override {
    return Find(modules, key);
  }
  std::optional<source::ModuleMeta> Module(const std::string& key) const override {
    return Find(metas, key);
  }
  std::optional<api::Module> ModuleObject(const std::string& key) const override {
    return Find(objects, key);
  }
  const std::vector<api::Module>& PluginModules() const override { return plugin_modules; }
  std::optional<server::NodePluginPods> PluginPods(const std::string& node) const override {
    if (!pods_listed) {
      return std::nullopt;
    }
    return Find(pods, node).value_or(server::NodePluginPods{});
  }
  std::set<std::string> Draining(const std::string& node) const override {
    return Find(draining, node).value_or(std::set<std::string>{});
  }
  bool ReportedByConnected(const std::string& key) const override {
    return reported.count(key) != 0;
  }

 private:
  template <typename T>
  static std::optional<T> Find(const std::map<std::string, T>& m, const std::string& key) {
    auto it = m.find(key);
    return it == m.end() ? std::nullopt : std::optional<T>(it->second);
  }
};

}  // namespace kmodd::testing

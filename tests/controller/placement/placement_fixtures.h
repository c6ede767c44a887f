#pragma once

// Small builders for planner tests: Modules from YAML (so rows read like manifests) and
// Nodes from a few fields.

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "api/decode.h"
#include "api/node.h"

namespace kmodd::testing {

inline api::Module ModuleFromYaml(const std::string& yaml) {
  auto m = api::DecodeModule(yaml);
  if (!m.ok()) {
    FAIL("fixture does not decode: " << m.status().message());
  }
  return *m;
}

inline api::Node MakeNode(std::string name, std::string kernel,
                          std::map<std::string, std::string> labels = {},
                          std::vector<api::Taint> taints = {}) {
  api::Node n;
  n.metadata.name = std::move(name);
  n.metadata.labels = std::move(labels);
  n.node_info.kernel_version = std::move(kernel);
  n.taints = std::move(taints);
  return n;
}

// A Module with one moduleName and the given mappings block (YAML, indented 6 spaces).
// Without a selector in `spec_extra` it selects every node (selector: {}).
inline std::string LoaderModule(const std::string& name, const std::string& container_extra,
                                const std::string& spec_extra = "") {
  const bool selects = spec_extra.find("selector:") != std::string::npos;
  return "apiVersion: kmm.sigs.x-k8s.io/v1beta1\n"
         "kind: Module\n"
         "metadata: {name: " + name + ", namespace: ns}\n"
         "spec:\n" + (selects ? "" : "  selector: {}\n") + spec_extra +
         "  moduleLoader:\n"
         "    container:\n"
         "      modprobe: {moduleName: drv}\n" + container_extra;
}

}  // namespace kmodd::testing

#pragma once

// Decoding of Module and Node documents from YAML or JSON text: single documents,
// multi-document streams and `v1 List`s (kubectl's `get -o yaml` output). A field of the
// wrong type is an error naming its path; an unknown Module field is a warning naming its
// path. Node documents are read leniently: kmodd reads a few of their many fields.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "api/diagnostic.h"
#include "api/module.h"
#include "api/module_policy.h"
#include "api/node.h"
#include "api/node_modules_config.h"

namespace kmodd::api {

template <typename T>
struct Located {
  T object;
  std::string source;
  int line = 0;
  // Line of each field path read from the document (for locating validation findings).
  std::map<std::string, int> field_lines;

  // The line of `path`, or of its nearest enclosing field, or of the object.
  int LineOf(const std::string& path) const {
    std::string p = path;
    while (!p.empty()) {
      if (auto it = field_lines.find(p); it != field_lines.end()) {
        return it->second;
      }
      const size_t cut = p.find_last_of(".[");
      p = cut == std::string::npos ? std::string() : p.substr(0, cut);
    }
    return line;
  }
};

// A v1 ConfigMap, as standalone mode reads a Module's build.dockerfileConfigMap beside it.
struct ConfigMap {
  ObjectMeta metadata;
  std::map<std::string, std::string> data;
};

struct Decoded {
  std::vector<Located<Module>> modules;
  std::vector<Located<ConfigMap>> config_maps;  // v1 ConfigMaps (build Dockerfiles)
  std::vector<Located<Node>> nodes;
  std::vector<Located<NodeModulesConfig>> node_modules_configs;
  std::vector<Located<ModulePolicy>> policies;  // kmodd.io/v1alpha1 ModulePolicy
  std::vector<Diagnostic> errors;
  std::vector<Diagnostic> warnings;
};

// Decodes every document in `text`; `source` names it in diagnostics. Objects with
// errors are not returned. Kinds other than Module, Node, NodeModulesConfig, ConfigMap and
// kmodd's ModulePolicy are skipped with a warning.
Decoded DecodeDocuments(std::string_view text, std::string_view source);

// Appends the decoding of `text` to `into`.
void DecodeInto(std::string_view text, std::string_view source, Decoded& into);

// Convenience for tests and single-object callers: exactly one Module, no errors.
[[nodiscard]] absl::StatusOr<Module> DecodeModule(std::string_view text);

}  // namespace kmodd::api

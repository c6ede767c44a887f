#pragma once

// The rules the Module CRD makes the API server enforce before any webhook runs: required
// fields, list sizes, patterns, defaults and KMM's CEL rule. They live in one file,
// api/crd_rules.yaml, which CMake compiles in and deploy/crd/generate.py writes
// into the CRD, so that wherever kmodd reads a Module it refuses what the API server
// refuses, at the same field path. Pure: no I/O.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <re2/re2.h>
#include <yaml-cpp/yaml.h>

#include "absl/status/statusor.h"
#include "api/yaml_reader.h"

namespace kmodd::api {

struct CrdRule {
  enum class Kind { kRequired, kMinItems, kMaxItems, kPattern, kDefault, kExclusive };
  Kind kind = Kind::kRequired;
  // One field, alternatives expanded: "spec.dra.deviceClasses[].name".
  std::string path;
  int64_t items = 0;              // kMinItems, kMaxItems
  std::string value;              // kPattern: the pattern; kDefault: the default, a string
  std::vector<std::string> keys;  // kExclusive: the two fields of the object at `path`
  std::string message;            // kExclusive: the CRD's message
  std::string hint;               // what to write instead
  std::shared_ptr<const RE2> re;  // kPattern, compiled
};

// The compiled-in rules, parsed once; an error only when that file is broken.
const absl::StatusOr<std::vector<CrdRule>>& CrdRules();

// Parses text in crd_rules.yaml's format (for CrdRules and tests).
[[nodiscard]] absl::StatusOr<std::vector<CrdRule>> ParseCrdRules(std::string_view text);

// Sets the rules' defaults where `module` (a Module document) leaves a field absent or null,
// as the API server does before it validates.
void ApplyCrdDefaults(YAML::Node& module);

// Reports into `ctx`, at each field's path, every rule that `module` breaks. The Module's
// schema findings so far (type errors) start at ctx.errors[first_error]: with any of them,
// or any of the rules', the CEL rules are not checked, as the API server skips them then.
void CheckCrdRules(const YAML::Node& module, size_t first_error, ReadContext& ctx);

}  // namespace kmodd::api

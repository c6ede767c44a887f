#pragma once

// `agentctl load -f FILE`: the modules to load, read from YAML (or JSON). FILE holds either
// one NodeModulesConfig module entry (name, namespace, version, config: {kernelVersion,
// containerImage, modprobe, ...}) as `kmodd-controller plan` prints them under
// spec.modules, or whole NodeModulesConfig documents. Decoding is the controller's own
// (api/decode.h), so both tools agree on every field.

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kmodd/v1/sync.pb.h"

namespace kmodd::agentctl {

// Every module of `text`, in file order, as the Agent service takes them; `source` names
// the file in errors. An error names the file, line and field; no modules is an error.
[[nodiscard]] absl::StatusOr<std::vector<v1::ModuleSpec>> ParseModuleFile(
    std::string_view text, std::string_view source);

}  // namespace kmodd::agentctl

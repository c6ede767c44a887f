#pragma once

// Validation of Modules: every rule KMM's admission webhook enforces, and kmodd's own on
// top. Every error names the field path and says what would be valid. Pure: no I/O.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "api/diagnostic.h"
#include "api/module.h"
#include "api/node_modules_config.h"

namespace kmodd::api {

// All problems with `m`, in field order; empty when valid.
std::vector<FieldError> ValidateModule(const Module& m);

// Rules that only apply to an update of `old_module` into `new_module`, plus every rule of
// ValidateModule on the new object.
std::vector<FieldError> ValidateModuleUpdate(const Module& old_module, const Module& new_module);

// The fields of `m` that only Kubernetes acts on (spec.devicePlugin and spec.dra: DaemonSets
// and DeviceClasses), each with a sentence saying so: warnings wherever a Module is read
// without Kubernetes (`validate`, `plan`, the standalone controller), so that a plugin that
// will not run there is never dropped silently. Empty when there are none.
std::vector<FieldError> KubernetesOnlyFields(const Module& m);

// Every rule of ValidateModule that bears on the fields one node's module entry carries
// (NodeModulesConfig spec.modules[]: what the controller sends an agent, and what
// `agentctl load` sends it), with paths relative to the entry (e.g. config.modprobe.dirName).
// The agent runs it on every entry, whichever sent it. One difference: a containerImage of
// the form dir:PATH or oci-layout:PATH[:TAG] (a tree or an image layout already on the node,
// for `agentctl load` and `kmodd-agent apply`) is left to the agent, which checks it where
// it opens it; ValidateModule never lets one into a Module.
std::vector<FieldError> ValidateNodeModuleSpec(const NodeModuleSpec& m);

// The longest dirName or firmwarePath accepted: the agent joins it onto an image root and
// the kernel release, which together must stay below PATH_MAX (4096).
inline constexpr size_t kMaxImagePath = 1024;

// The rule for dirName and firmwarePath, which the agent joins onto an image's root: ""
// when `dir` is absolute, in normal form (no '.', '..', '//' or trailing '/'), free of
// control characters and at most kMaxImagePath bytes; otherwise what is wrong, ending with
// what would be valid (`example`). The agent applies it again where it joins the path.
std::string ImagePathProblem(std::string_view dir, std::string_view example);

// A kernel module name as the kernel and modprobe accept it (dashes and underscores are
// the same to the kernel); used by validation and by the planner's output.
bool IsValidKernelModuleName(std::string_view name);

}  // namespace kmodd::api

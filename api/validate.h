#pragma once

// Validation of Modules: every rule KMM's admission webhook enforces, and kmodd's own on
// top. Every error names the field path and says what would be valid. Pure: no I/O.

#include <vector>

#include "api/diagnostic.h"
#include "api/module.h"

namespace kmodd::api {

// All problems with `m`, in field order; empty when valid.
std::vector<FieldError> ValidateModule(const Module& m);

// Rules that only apply to an update of `old_module` into `new_module`, plus every rule of
// ValidateModule on the new object.
std::vector<FieldError> ValidateModuleUpdate(const Module& old_module, const Module& new_module);

// A kernel module name as the kernel and modprobe accept it (dashes and underscores are
// the same to the kernel); used by validation and by the planner's output.
bool IsValidKernelModuleName(std::string_view name);

}  // namespace kmodd::api

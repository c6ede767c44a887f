#pragma once

#include "common/value.h"

namespace kmodd::kube {

// RFC 7386 JSON merge patch: a map merges key by key, null deletes, anything else replaces.
Value ApplyMergePatch(const Value& target, const Value& patch);

}  // namespace kmodd::kube

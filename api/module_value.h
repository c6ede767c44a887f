#pragma once

// Parts of a Module as Kubernetes writes them, for the objects made from them (the plan's
// NodeModulesConfig, the device plugin DaemonSet).

#include "api/module.h"
#include "common/value.h"

namespace kmodd::api {

// A core/v1 Toleration; empty fields left out.
Value TolerationValue(const Toleration& t);

}  // namespace kmodd::api

#pragma once

// Any protobuf message as a Value tree, for -o json|yaml. Every field is printed, set or
// not, under its JSON (lowerCamel) name and in declaration order, so that scripts can rely
// on the keys being there; enums print as their names, maps sorted by key.

#include "common/value.h"
#include "google/protobuf/message.h"

namespace kmodd::agentctl {

Value MessageValue(const google::protobuf::Message& m);

}  // namespace kmodd::agentctl

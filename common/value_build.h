#pragma once

// Values built from the containers most objects are made of.

#include <map>
#include <string>
#include <vector>

#include "common/value.h"

namespace kmodd {

// A list of strings; a map of string to string (its keys in order).
Value StringListValue(const std::vector<std::string>& items);
Value StringMapValue(const std::map<std::string, std::string>& m);

}  // namespace kmodd

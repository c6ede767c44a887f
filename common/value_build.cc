#include "common/value_build.h"

namespace kmodd {

Value StringListValue(const std::vector<std::string>& items) {
  Value out = Value::EmptyList();
  for (const std::string& s : items) {
    out.Append(s);
  }
  return out;
}

Value StringMapValue(const std::map<std::string, std::string>& m) {
  Value out = Value::EmptyMap();
  for (const auto& [k, v] : m) {
    out.Set(k, v);
  }
  return out;
}

}  // namespace kmodd

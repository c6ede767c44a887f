#include "controller/kube/merge_patch.h"

#include <string>
#include <utility>

namespace kmodd::kube {

Value ApplyMergePatch(const Value& target, const Value& patch) {
  if (!patch.IsMap()) {
    return patch;
  }
  Value::Map out = target.IsMap() ? target.AsMap() : Value::Map{};
  for (const auto& [key, change] : patch.AsMap()) {
    auto it = out.begin();
    while (it != out.end() && it->first != key) {
      ++it;
    }
    if (change.IsNull()) {
      if (it != out.end()) {
        out.erase(it);
      }
    } else if (it != out.end()) {
      it->second = ApplyMergePatch(it->second, change);
    } else {
      out.emplace_back(key, ApplyMergePatch(Value(), change));
    }
  }
  return Value(std::move(out));
}

}  // namespace kmodd::kube

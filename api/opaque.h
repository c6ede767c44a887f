#pragma once

// A Kubernetes sub-tree that kmodd carries without interpreting it. It keeps the
// canonical (JSON) text of the tree, so that equality is by content and copies are cheap.

#include <string>

namespace kmodd::api {

struct Opaque {
  std::string json;  // empty when the field was absent
  bool Present() const { return !json.empty(); }
  bool operator==(const Opaque&) const = default;
};

}  // namespace kmodd::api

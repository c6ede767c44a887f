#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace kmodd::api {

// The part of Kubernetes' ObjectMeta that kmodd reads.
struct ObjectMeta {
  std::string name;
  std::string namespace_;  // "default" when the document has none, as kubectl does
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::string uid;
  std::string resource_version;
  int64_t generation = 0;
  bool operator==(const ObjectMeta&) const = default;
};

}  // namespace kmodd::api

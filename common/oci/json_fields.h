#pragma once

// Typed reads of registry and pull-secret JSON (common/json.h) with shape checks: every
// wrong shape is an InvalidArgument naming the document and the field path
// ("manifest: manifests[2].platform: expected an object, got a string"), never an
// exception or a silent default. A field that is absent or null is "not set", as Go's
// encoding/json (Docker's and containerd's) reads it.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/json.h"

namespace kmodd::image {

// Bounds for one registry or pull-secret document (besides the 4 MiB body cap): manifests,
// indexes, token answers and .dockerconfigjson files nest a few levels and hold dozens of
// entries; a few thousand annotations would be a strange but valid image.
inline constexpr JsonLimits kRegistryJsonLimits{32, 10000, 200000};

// Parses `text` as the JSON object `doc` names ("manifest", "pull secret (.dockerconfigjson)").
[[nodiscard]] absl::StatusOr<Value> ParseObject(std::string_view text, const std::string& doc);

// The member `key` of object `obj` (whose path is `where`), of the given shape; nullptr /
// "" when absent or null. `where` is the document and path so far ("manifest: manifests[1]").
[[nodiscard]] absl::StatusOr<const Value*> OptionalObject(const Value& obj, std::string_view key,
                                                          const std::string& where);
[[nodiscard]] absl::StatusOr<const Value*> OptionalList(const Value& obj, std::string_view key,
                                                        const std::string& where);
[[nodiscard]] absl::StatusOr<std::string> OptionalString(const Value& obj, std::string_view key,
                                                         const std::string& where);
// The same, but absent or null is an error naming the field.
[[nodiscard]] absl::StatusOr<std::string> RequiredString(const Value& obj, std::string_view key,
                                                         const std::string& where);
[[nodiscard]] absl::StatusOr<int64_t> RequiredInt(const Value& obj, std::string_view key,
                                                  const std::string& where);

}  // namespace kmodd::image

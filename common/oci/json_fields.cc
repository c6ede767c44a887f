#include "common/oci/json_fields.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kmodd::image {

namespace {

absl::Status WrongShape(const std::string& where, std::string_view key, const char* want,
                        const Value& got) {
  return absl::InvalidArgumentError(
      absl::StrCat(where, ".", std::string(key), ": expected ", want, ", got ", JsonTypeName(got)));
}

absl::Status Missing(const std::string& where, std::string_view key) {
  return absl::InvalidArgumentError(absl::StrCat(where, ".", std::string(key), ": required, missing"));
}

// The member, or nullptr when absent or null.
const Value* Member(const Value& obj, std::string_view key) {
  const Value* v = obj.Find(key);
  return v != nullptr && !v->IsNull() ? v : nullptr;
}

}  // namespace

absl::StatusOr<Value> ParseObject(std::string_view text, const std::string& doc) {
  absl::StatusOr<Value> v = ParseJson(text, kRegistryJsonLimits);
  if (!v.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(doc, ": not valid JSON: ", v.status().message()));
  }
  if (!v->IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(doc, ": expected a JSON object, got ", JsonTypeName(*v)));
  }
  return v;
}

absl::StatusOr<const Value*> OptionalObject(const Value& obj, std::string_view key,
                                            const std::string& where) {
  const Value* v = Member(obj, key);
  if (v != nullptr && !v->IsMap()) {
    return WrongShape(where, key, "an object", *v);
  }
  return v;
}

absl::StatusOr<const Value*> OptionalList(const Value& obj, std::string_view key,
                                          const std::string& where) {
  const Value* v = Member(obj, key);
  if (v != nullptr && !v->IsList()) {
    return WrongShape(where, key, "a list", *v);
  }
  return v;
}

absl::StatusOr<std::string> OptionalString(const Value& obj, std::string_view key,
                                           const std::string& where) {
  const Value* v = Member(obj, key);
  if (v == nullptr) {
    return std::string();
  }
  if (!v->IsString()) {
    return WrongShape(where, key, "a string", *v);
  }
  return v->AsString();
}

absl::StatusOr<std::string> RequiredString(const Value& obj, std::string_view key,
                                           const std::string& where) {
  if (Member(obj, key) == nullptr) {
    return Missing(where, key);
  }
  return OptionalString(obj, key, where);
}

absl::StatusOr<int64_t> RequiredInt(const Value& obj, std::string_view key,
                                    const std::string& where) {
  const Value* v = Member(obj, key);
  if (v == nullptr) {
    return Missing(where, key);
  }
  if (!v->IsInt()) {
    return WrongShape(where, key, "an integer", *v);
  }
  return v->AsInt();
}

}  // namespace kmodd::image

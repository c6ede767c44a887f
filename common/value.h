#pragma once

// A small ordered document tree for machine output (-o json|yaml). Keys keep insertion
// order so that output reads like the Kubernetes objects it mirrors.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace kmodd {

class Value {
 public:
  using List = std::vector<Value>;
  using Map = std::vector<std::pair<std::string, Value>>;

  Value() = default;
  Value(std::nullptr_t) {}  // NOLINT(google-explicit-constructor)
  Value(bool b) : v_(b) {}  // NOLINT(google-explicit-constructor)
  Value(int v) : v_(static_cast<int64_t>(v)) {}  // NOLINT(google-explicit-constructor)
  Value(int64_t v) : v_(v) {}  // NOLINT(google-explicit-constructor)
  Value(std::string s) : v_(std::move(s)) {}  // NOLINT(google-explicit-constructor)
  Value(std::string_view s) : v_(std::string(s)) {}  // NOLINT(google-explicit-constructor)
  Value(const char* s) : v_(std::string(s)) {}  // NOLINT(google-explicit-constructor)
  Value(List l) : v_(std::move(l)) {}  // NOLINT(google-explicit-constructor)
  Value(Map m) : v_(std::move(m)) {}  // NOLINT(google-explicit-constructor)

  static Value EmptyMap() { return Value(Map{}); }
  static Value EmptyList() { return Value(List{}); }

  bool IsNull() const { return std::holds_alternative<std::monostate>(v_); }
  bool IsBool() const { return std::holds_alternative<bool>(v_); }
  bool IsInt() const { return std::holds_alternative<int64_t>(v_); }
  bool IsString() const { return std::holds_alternative<std::string>(v_); }
  bool IsList() const { return std::holds_alternative<List>(v_); }
  bool IsMap() const { return std::holds_alternative<Map>(v_); }

  bool AsBool() const { return std::get<bool>(v_); }
  int64_t AsInt() const { return std::get<int64_t>(v_); }
  const std::string& AsString() const { return std::get<std::string>(v_); }
  const List& AsList() const { return std::get<List>(v_); }
  const Map& AsMap() const { return std::get<Map>(v_); }

  // Map building: Set appends (keys are expected to be unique by construction).
  Value& Set(std::string key, Value v);
  // List building.
  Value& Append(Value v);
  // Map lookup; nullptr when absent or not a map.
  const Value* Find(std::string_view key) const;

 private:
  std::variant<std::monostate, bool, int64_t, std::string, List, Map> v_;
};

// Compact-free, two-space indented JSON, as kubectl prints it.
std::string ToJson(const Value& v);
// The same on one line without spaces or a trailing newline.
std::string ToJsonLine(const Value& v);
// Block-style YAML; strings that would read back as another type are quoted.
std::string ToYaml(const Value& v);

}  // namespace kmodd

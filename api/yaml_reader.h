#pragma once

// A typed, path-tracking reader over one YAML/JSON mapping. Each accessor marks its key as
// known; Finish() reports the keys nobody asked for. Type errors name the full field path.
// yaml-cpp exceptions do not leave this file's implementation.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "api/diagnostic.h"
#include "api/opaque.h"

namespace kmodd::api {

struct ReadContext {
  std::string source;
  std::string object;  // filled in once metadata is read
  std::vector<Diagnostic> errors;
  std::vector<Diagnostic> warnings;
  // Field path -> 1-based line of every field read, so that later findings (validation)
  // can point at the line that holds the field.
  std::map<std::string, int> lines;

  void Error(const YAML::Node& at, const std::string& path, const std::string& message);
  void Warning(const YAML::Node& at, const std::string& path, const std::string& message);
};

class YamlReader {
 public:
  // `node` must be a mapping or null (an absent object); anything else is a type error.
  YamlReader(ReadContext& ctx, const YAML::Node& node, std::string path,
             bool warn_unknown = true);

  bool Ok() const { return ok_; }
  const std::string& Path() const { return path_; }

  void String(const char* key, std::string& out);
  void OptionalString(const char* key, std::optional<std::string>& out);
  // Kubernetes' IntOrString: a plain integer or a string, as text ("" when absent).
  void IntOrString(const char* key, std::string& out);
  void Bool(const char* key, bool& out);
  void OptionalBool(const char* key, std::optional<bool>& out);
  void Int64(const char* key, int64_t& out);
  void Int32(const char* key, int32_t& out);
  void OptionalInt64(const char* key, std::optional<int64_t>& out);
  void StringList(const char* key, std::vector<std::string>& out);
  void OptionalStringList(const char* key, std::optional<std::vector<std::string>>& out);
  void StringMap(const char* key, std::map<std::string, std::string>& out);
  void Raw(const char* key, Opaque& out);
  // Raw, for a field that must be a list (what is inside is carried as it is).
  void RawList(const char* key, Opaque& out);
  // Known keys that kmodd does not read.
  void Ignore(const char* key);

  template <typename T, typename F>
  void Object(const char* key, T& out, F&& read) {
    YAML::Node n = Take(key);
    if (!IsAbsent(n)) {
      YamlReader sub(ctx_, n, Join(key), warn_unknown_);
      if (sub.Ok()) {
        read(sub, out);
        sub.Finish();
      }
    }
  }

  template <typename T, typename F>
  void OptionalObject(const char* key, std::optional<T>& out, F&& read) {
    YAML::Node n = Take(key);
    if (!IsAbsent(n)) {
      YamlReader sub(ctx_, n, Join(key), warn_unknown_);
      if (sub.Ok()) {
        out.emplace();
        read(sub, *out);
        sub.Finish();
      }
    }
  }

  template <typename T, typename F>
  void ObjectList(const char* key, std::vector<T>& out, F&& read) {
    const YAML::Node n = TakeList(key, "a list");
    if (!n.IsDefined()) {
      return;
    }
    for (size_t i = 0; i < n.size(); ++i) {
      YamlReader sub(ctx_, n[i], Join(key) + "[" + std::to_string(i) + "]", warn_unknown_);
      T item{};
      if (sub.Ok()) {
        read(sub, item);
        sub.Finish();
      }
      out.push_back(std::move(item));
    }
  }

  // Warns about every key of this mapping that no accessor asked for.
  void Finish();

  // Leaves the path used in diagnostics for the current object.
  ReadContext& Context() { return ctx_; }
  const YAML::Node& At() const { return node_; }

 private:
  YAML::Node Take(const char* key);
  // The list at `key`; an undefined node when it is absent, or not a list (then reported as
  // "expected <what>").
  YAML::Node TakeList(const char* key, const char* what);
  std::string Join(const char* key) const;
  static bool IsAbsent(const YAML::Node& n);
  bool ScalarString(const YAML::Node& n, const std::string& path, std::string& out);

  ReadContext& ctx_;
  YAML::Node node_;
  std::string path_;
  bool warn_unknown_;
  bool ok_ = true;
  std::vector<std::string> known_;
};

// Whether `n` is absent, or a null as YAML reads it (a key with no value, `~`, `null`):
// both mean "not set", as to Go's JSON decoding and the API server.
bool IsAbsentOrNull(const YAML::Node& n);

// Canonical JSON text of a YAML sub-tree (for Opaque).
std::string CanonicalJson(const YAML::Node& n);

}  // namespace kmodd::api

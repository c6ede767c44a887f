#include "api/yaml_reader.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/value.h"

namespace kmodd::api {

namespace {

int LineOf(const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  return m.line >= 0 ? m.line + 1 : 0;
}

// A plain (unquoted) scalar that YAML resolves to null.
bool IsPlainNull(const YAML::Node& n) {
  if (n.IsNull()) {
    return true;
  }
  if (!n.IsScalar() || n.Tag() != "?") {
    return false;
  }
  const std::string& s = n.Scalar();
  return s == "~" || s == "null" || s == "Null" || s == "NULL";
}

// The kind of value a plain scalar resolves to, for type errors that tell the user what
// they wrote.
std::string DescribePlain(const YAML::Node& n) {
  if (n.IsMap()) {
    return "a mapping";
  }
  if (n.IsSequence()) {
    return "a list";
  }
  bool b = false;
  if (YAML::convert<bool>::decode(n, b)) {
    return "a boolean";
  }
  double d = 0;
  if (YAML::convert<double>::decode(n, d)) {
    return "a number";
  }
  return "a string";
}

bool IsPlain(const YAML::Node& n) { return n.IsScalar() && n.Tag() == "?"; }

Value ToValue(const YAML::Node& n) {
  if (n.IsMap()) {
    Value m = Value::EmptyMap();
    for (const auto& kv : n) {
      m.Set(kv.first.Scalar(), ToValue(kv.second));
    }
    return m;
  }
  if (n.IsSequence()) {
    Value l = Value::EmptyList();
    for (const auto& item : n) {
      l.Append(ToValue(item));
    }
    return l;
  }
  if (IsPlainNull(n)) {
    return Value();
  }
  if (IsPlain(n)) {
    bool b = false;
    long long i = 0;
    if (YAML::convert<long long>::decode(n, i)) {
      return Value(static_cast<int64_t>(i));
    }
    if (n.Scalar() == "true" || n.Scalar() == "false") {
      YAML::convert<bool>::decode(n, b);
      return Value(b);
    }
  }
  return Value(n.Scalar());
}

}  // namespace

void ReadContext::Error(const YAML::Node& at, const std::string& path,
                        const std::string& message) {
  errors.push_back(Diagnostic{source, LineOf(at), object, path, message});
}

void ReadContext::Warning(const YAML::Node& at, const std::string& path,
                          const std::string& message) {
  warnings.push_back(Diagnostic{source, LineOf(at), object, path, message});
}

YamlReader::YamlReader(ReadContext& ctx, const YAML::Node& node, std::string path,
                       bool warn_unknown)
    : ctx_(ctx), node_(node), path_(std::move(path)), warn_unknown_(warn_unknown) {
  if (IsAbsent(node_)) {
    node_ = YAML::Node(YAML::NodeType::Map);
  } else if (!node_.IsMap()) {
    ctx_.Error(node_, path_, absl::StrCat("expected a mapping, got ", DescribePlain(node_)));
    ok_ = false;
  }
}

bool IsAbsentOrNull(const YAML::Node& n) { return !n.IsDefined() || IsPlainNull(n); }

bool YamlReader::IsAbsent(const YAML::Node& n) { return IsAbsentOrNull(n); }

std::string YamlReader::Join(const char* key) const {
  return path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key);
}

YAML::Node YamlReader::Take(const char* key) {
  known_.emplace_back(key);
  if (!ok_) {
    return YAML::Node();
  }
  // Look the key up without inserting it (operator[] on a non-const node would).
  const YAML::Node& const_node = node_;
  YAML::Node n = const_node[key];
  if (n.IsDefined()) {
    const int line = LineOf(n);
    const std::string path = Join(key);
    ctx_.lines[path] = line;
    if (n.IsSequence()) {
      for (size_t i = 0; i < n.size(); ++i) {
        ctx_.lines[absl::StrCat(path, "[", i, "]")] = LineOf(n[i]);
      }
    }
  }
  return n;
}

bool YamlReader::ScalarString(const YAML::Node& n, const std::string& path, std::string& out) {
  if (!n.IsScalar()) {
    ctx_.Error(n, path, absl::StrCat("expected a string, got ", DescribePlain(n)));
    return false;
  }
  if (IsPlain(n) && DescribePlain(n) != "a string") {
    ctx_.Error(n, path,
               absl::StrCat("expected a string, got ", DescribePlain(n), " (quote it: \"",
                            n.Scalar(), "\")"));
    return false;
  }
  out = n.Scalar();
  return true;
}

void YamlReader::String(const char* key, std::string& out) {
  YAML::Node n = Take(key);
  if (!IsAbsent(n)) {
    ScalarString(n, Join(key), out);
  }
}

void YamlReader::OptionalString(const char* key, std::optional<std::string>& out) {
  YAML::Node n = Take(key);
  std::string v;
  if (!IsAbsent(n) && ScalarString(n, Join(key), v)) {
    out = std::move(v);
  }
}

void YamlReader::IntOrString(const char* key, std::string& out) {
  YAML::Node n = Take(key);
  if (IsAbsent(n)) {
    return;
  }
  if (!n.IsScalar()) {
    ctx_.Error(n, Join(key), absl::StrCat("expected a number or a string, got ", DescribePlain(n)));
    return;
  }
  out = n.Scalar();
}

void YamlReader::Bool(const char* key, bool& out) {
  std::optional<bool> v;
  OptionalBool(key, v);
  if (v) {
    out = *v;
  }
}

void YamlReader::OptionalBool(const char* key, std::optional<bool>& out) {
  YAML::Node n = Take(key);
  if (IsAbsent(n)) {
    return;
  }
  bool b = false;
  if (!IsPlain(n) || !YAML::convert<bool>::decode(n, b)) {
    ctx_.Error(n, Join(key),
               absl::StrCat("expected a boolean (true or false), got ", DescribePlain(n)));
    return;
  }
  out = b;
}

void YamlReader::OptionalInt64(const char* key, std::optional<int64_t>& out) {
  YAML::Node n = Take(key);
  if (IsAbsent(n)) {
    return;
  }
  long long v = 0;
  if (!IsPlain(n) || !YAML::convert<long long>::decode(n, v)) {
    ctx_.Error(n, Join(key), absl::StrCat("expected an integer, got ", DescribePlain(n)));
    return;
  }
  out = v;
}

void YamlReader::Int64(const char* key, int64_t& out) {
  std::optional<int64_t> v;
  OptionalInt64(key, v);
  if (v) {
    out = *v;
  }
}

void YamlReader::Int32(const char* key, int32_t& out) {
  std::optional<int64_t> v;
  OptionalInt64(key, v);
  if (!v) {
    return;
  }
  if (*v < std::numeric_limits<int32_t>::min() || *v > std::numeric_limits<int32_t>::max()) {
    ctx_.Error(Take(key), Join(key), "expected a 32-bit integer, the value is out of range");
    return;
  }
  out = static_cast<int32_t>(*v);
}

YAML::Node YamlReader::TakeList(const char* key, const char* what) {
  YAML::Node n = Take(key);
  if (IsAbsent(n)) {
    return YAML::Node(YAML::NodeType::Undefined);
  }
  if (!n.IsSequence()) {
    ctx_.Error(n, Join(key), absl::StrCat("expected ", what, ", got ", DescribePlain(n)));
    return YAML::Node(YAML::NodeType::Undefined);
  }
  return n;
}

void YamlReader::OptionalStringList(const char* key,
                                    std::optional<std::vector<std::string>>& out) {
  const YAML::Node n = TakeList(key, "a list of strings");
  if (!n.IsDefined()) {
    return;
  }
  std::vector<std::string> items;
  bool ok = true;
  for (size_t i = 0; i < n.size(); ++i) {
    std::string s;
    ok = ScalarString(n[i], absl::StrCat(Join(key), "[", i, "]"), s) && ok;
    items.push_back(std::move(s));
  }
  if (ok) {
    out = std::move(items);
  }
}

void YamlReader::StringList(const char* key, std::vector<std::string>& out) {
  std::optional<std::vector<std::string>> v;
  OptionalStringList(key, v);
  if (v) {
    out = std::move(*v);
  }
}

void YamlReader::StringMap(const char* key, std::map<std::string, std::string>& out) {
  YAML::Node n = Take(key);
  if (IsAbsent(n)) {
    return;
  }
  if (!n.IsMap()) {
    ctx_.Error(n, Join(key),
               absl::StrCat("expected a mapping of strings, got ", DescribePlain(n)));
    return;
  }
  for (const auto& kv : n) {
    std::string k = kv.first.Scalar();
    std::string v;
    if (IsAbsent(kv.second)) {
      out[k] = "";
    } else if (ScalarString(kv.second, absl::StrCat(Join(key), "[\"", k, "\"]"), v)) {
      out[k] = std::move(v);
    }
  }
}

void YamlReader::Raw(const char* key, Opaque& out) {
  YAML::Node n = Take(key);
  if (!IsAbsent(n)) {
    out.json = CanonicalJson(n);
  }
}

void YamlReader::RawList(const char* key, Opaque& out) {
  if (const YAML::Node n = TakeList(key, "a list"); n.IsDefined()) {
    out.json = CanonicalJson(n);
  }
}

void YamlReader::Ignore(const char* key) { known_.emplace_back(key); }

void YamlReader::Finish() {
  if (!ok_ || !warn_unknown_) {
    return;
  }
  for (const auto& kv : node_) {
    const std::string& k = kv.first.Scalar();
    if (std::find(known_.begin(), known_.end(), k) == known_.end()) {
      ctx_.Warning(kv.first, Join(k.c_str()),
                   "unknown field, ignored (check its spelling against the Module reference)");
    }
  }
}

std::string CanonicalJson(const YAML::Node& n) {
  std::string s = ToJson(ToValue(n));
  if (!s.empty() && s.back() == '\n') {
    s.pop_back();
  }
  return s;
}

}  // namespace kmodd::api

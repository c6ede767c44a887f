#include "common/json.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace kmodd {
namespace {

// Up to this many keys a linear scan finds a repeated key faster than hashing every key.
constexpr size_t kLinearKeys = 16;

class Parser {
 public:
  Parser(std::string_view text, const JsonLimits& limits) : s_(text), limits_(limits) {}

  absl::StatusOr<Value> ParseDocument() {
    Value v;
    if (absl::Status st = ParseValue(v, 0); !st.ok()) {
      return st;
    }
    SkipSpace();
    if (pos_ != s_.size()) {
      return Error("unexpected data after the value");
    }
    return v;
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("JSON: ", std::string(what), " at offset ", pos_));
  }

  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) == word) {
      pos_ += word.size();
      return true;
    }
    return false;
  }

  absl::Status ParseValue(Value& out, int depth) {
    if (depth > limits_.max_depth) {
      return Error(absl::StrCat("nesting deeper than ", limits_.max_depth, " levels"));
    }
    if (++values_ > limits_.max_values) {
      return Error(absl::StrCat("more than ", limits_.max_values, " values in one document"));
    }
    SkipSpace();
    if (pos_ >= s_.size()) {
      return Error("unexpected end of input");
    }
    const char c = s_[pos_];
    if (c == '{') {
      return ParseObject(out, depth);
    }
    if (c == '[') {
      return ParseArray(out, depth);
    }
    if (c == '"') {
      std::string str;
      if (absl::Status st = ParseString(str); !st.ok()) {
        return st;
      }
      out = Value(std::move(str));
      return absl::OkStatus();
    }
    if (Literal("true")) {
      out = Value(true);
      return absl::OkStatus();
    }
    if (Literal("false")) {
      out = Value(false);
      return absl::OkStatus();
    }
    if (Literal("null")) {
      out = Value(nullptr);
      return absl::OkStatus();
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      return ParseNumber(out);
    }
    return Error("unexpected character");
  }

  absl::Status ParseObject(Value& out, int depth) {
    ++pos_;  // {
    Value::Map map;
    // Key -> index in `map`, built once the object outgrows a linear scan: a Node with
    // 100,000 labels must cost a hash lookup per label, not a scan of the ones before it.
    absl::flat_hash_map<std::string, size_t> index;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      out = Value(std::move(map));
      return absl::OkStatus();
    }
    while (true) {
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') {
        return Error("expected a string key");
      }
      std::string key;
      if (absl::Status st = ParseString(key); !st.ok()) {
        return st;
      }
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':') {
        return Error("expected ':'");
      }
      ++pos_;
      Value item;
      if (absl::Status st = ParseValue(item, depth + 1); !st.ok()) {
        return st;
      }
      if (const size_t at = Find(map, index, key); at < map.size()) {
        map[at].second = std::move(item);
      } else if (map.size() >= limits_.max_keys_per_object) {
        return Error(absl::StrCat("more than ", limits_.max_keys_per_object, " keys in one object"));
      } else {
        if (!index.empty()) {
          index.emplace(key, map.size());
        }
        map.emplace_back(std::move(key), std::move(item));
        if (index.empty() && map.size() > kLinearKeys) {
          index.reserve(map.size() * 2);
          for (size_t i = 0; i < map.size(); ++i) {
            index.emplace(map[i].first, i);
          }
        }
      }
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        out = Value(std::move(map));
        return absl::OkStatus();
      }
      return Error("expected ',' or '}'");
    }
  }

  // The index of `key` in `map`, or map.size().
  static size_t Find(const Value::Map& map, const absl::flat_hash_map<std::string, size_t>& index,
                     const std::string& key) {
    if (!index.empty()) {
      const auto it = index.find(key);
      return it != index.end() ? it->second : map.size();
    }
    for (size_t i = 0; i < map.size(); ++i) {
      if (map[i].first == key) {
        return i;
      }
    }
    return map.size();
  }

  absl::Status ParseArray(Value& out, int depth) {
    ++pos_;  // [
    Value::List list;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      out = Value(std::move(list));
      return absl::OkStatus();
    }
    while (true) {
      Value item;
      if (absl::Status st = ParseValue(item, depth + 1); !st.ok()) {
        return st;
      }
      list.push_back(std::move(item));
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        out = Value(std::move(list));
        return absl::OkStatus();
      }
      return Error("expected ',' or ']'");
    }
  }

  absl::Status ParseNumber(Value& out) {
    const size_t start = pos_;
    if (s_[pos_] == '-') {
      ++pos_;
    }
    if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') {
      return Error("expected a digit");
    }
    if (s_[pos_] == '0' && pos_ + 1 < s_.size() && s_[pos_ + 1] >= '0' && s_[pos_ + 1] <= '9') {
      return Error("leading zero in a number");
    }
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E')) {
      return Error("a number with a fraction or exponent (Kubernetes API types have no floats)");
    }
    const std::string digits(s_.substr(start, pos_ - start));
    errno = 0;
    char* end = nullptr;
    const long long n = std::strtoll(digits.c_str(), &end, 10);
    if (errno == ERANGE) {
      pos_ = start;
      return Error("integer out of the int64 range");
    }
    out = Value(static_cast<int64_t>(n));
    return absl::OkStatus();
  }

  static int Hex(char c) {
    if (c >= '0' && c <= '9') {
      return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
      return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
      return c - 'A' + 10;
    }
    return -1;
  }

  // The four hex digits after "\u", or -1.
  int Hex4() {
    if (pos_ + 4 > s_.size()) {
      return -1;
    }
    int v = 0;
    for (size_t i = 0; i < 4; ++i) {
      const int d = Hex(s_[pos_ + i]);
      if (d < 0) {
        return -1;
      }
      v = v * 16 + d;
    }
    pos_ += 4;
    return v;
  }

  static void AppendUtf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  // The length of the well-formed UTF-8 sequence (RFC 3629: no overlong form, no surrogate,
  // nothing past U+10FFFF) that starts `s`, or 0.
  static size_t Utf8Length(std::string_view s) {
    const auto b = [&s](size_t i) { return i < s.size() ? static_cast<unsigned char>(s[i]) : 0; };
    const auto cont = [&b](size_t i) { return (b(i) & 0xC0) == 0x80; };
    const unsigned char c = b(0);
    if (c >= 0xC2 && c <= 0xDF) {
      return cont(1) ? 2 : 0;
    }
    if (c >= 0xE0 && c <= 0xEF) {
      const unsigned char lo = c == 0xE0 ? 0xA0 : 0x80;
      const unsigned char hi = c == 0xED ? 0x9F : 0xBF;
      return b(1) >= lo && b(1) <= hi && cont(2) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
      const unsigned char lo = c == 0xF0 ? 0x90 : 0x80;
      const unsigned char hi = c == 0xF4 ? 0x8F : 0xBF;
      return b(1) >= lo && b(1) <= hi && cont(2) && cont(3) ? 4 : 0;
    }
    return 0;
  }

  absl::Status ParseEscape(std::string& out) {
    if (pos_ >= s_.size()) {
      return Error("unterminated string");
    }
    const char e = s_[pos_++];
    switch (e) {
      case '"': out.push_back('"'); return absl::OkStatus();
      case '\\': out.push_back('\\'); return absl::OkStatus();
      case '/': out.push_back('/'); return absl::OkStatus();
      case 'b': out.push_back('\b'); return absl::OkStatus();
      case 'f': out.push_back('\f'); return absl::OkStatus();
      case 'n': out.push_back('\n'); return absl::OkStatus();
      case 'r': out.push_back('\r'); return absl::OkStatus();
      case 't': out.push_back('\t'); return absl::OkStatus();
      case 'u': break;
      default: return Error("invalid escape");
    }
    const int unit = Hex4();
    if (unit < 0) {
      return Error("invalid \\u escape");
    }
    uint32_t cp = static_cast<uint32_t>(unit);
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      // A high surrogate makes a code point only with the low one after it; alone it is
      // replaced, as Go does.
      const size_t save = pos_;
      int low = -1;
      if (s_.substr(pos_, 2) == "\\u") {
        pos_ += 2;
        low = Hex4();
      }
      if (low >= 0xDC00 && low <= 0xDFFF) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + (static_cast<uint32_t>(low) - 0xDC00);
      } else {
        pos_ = save;
        cp = 0xFFFD;
      }
    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
      cp = 0xFFFD;
    }
    AppendUtf8(out, cp);
    return absl::OkStatus();
  }

  absl::Status ParseString(std::string& out) {
    ++pos_;  // "
    while (true) {
      const size_t run = pos_;
      while (pos_ < s_.size() && s_[pos_] != '"' && s_[pos_] != '\\') {
        const auto c = static_cast<unsigned char>(s_[pos_]);
        if (c < 0x20) {
          break;
        }
        if (c < 0x80) {
          ++pos_;
        } else if (const size_t n = Utf8Length(s_.substr(pos_)); n > 0) {
          pos_ += n;
        } else {
          return Error("invalid UTF-8 in a string");
        }
      }
      out.append(s_.substr(run, pos_ - run));
      if (pos_ >= s_.size()) {
        return Error("unterminated string");
      }
      const char c = s_[pos_++];
      if (c == '"') {
        return absl::OkStatus();
      }
      if (c != '\\') {
        --pos_;
        return Error("control character in a string");
      }
      if (absl::Status st = ParseEscape(out); !st.ok()) {
        return st;
      }
    }
  }

  std::string_view s_;
  const JsonLimits& limits_;
  size_t pos_ = 0;
  size_t values_ = 0;
};

}  // namespace

absl::StatusOr<Value> ParseJson(std::string_view text, const JsonLimits& limits) {
  return Parser(text, limits).ParseDocument();
}

absl::StatusOr<Value> ParseJson(std::string_view text) { return ParseJson(text, JsonLimits{}); }

absl::Status JsonFramer::Feed(const char* data, size_t n, const Sink& sink) {
  std::string_view in(data, n);
  while (!in.empty()) {
    if (buffer_.empty()) {
      // Between values: skip whitespace; a value must start with { or [.
      const size_t start = in.find_first_not_of(" \t\r\n");
      if (start == std::string_view::npos) {
        return absl::OkStatus();
      }
      in.remove_prefix(start);
      if (in[0] != '{' && in[0] != '[') {
        return absl::InvalidArgumentError(
            absl::StrCat("JSON stream: expected an object or array, got byte ",
                         static_cast<int>(static_cast<unsigned char>(in[0]))));
      }
    }
    bool complete = false;
    size_t i = 0;
    while (i < in.size() && !complete) {
      const char c = in[i++];
      if (in_string_) {
        if (escaped_) {
          escaped_ = false;
        } else if (c == '\\') {
          escaped_ = true;
        } else if (c == '"') {
          in_string_ = false;
        }
      } else if (c == '"') {
        in_string_ = true;
      } else if (c == '{' || c == '[') {
        ++depth_;
      } else if (c == '}' || c == ']') {
        complete = --depth_ == 0;
      }
    }
    if (buffer_.size() + i > max_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("JSON stream: a value is over the limit of ", max_, " bytes"));
    }
    buffer_.append(in.substr(0, i));
    in.remove_prefix(i);
    if (complete) {
      const std::string value = std::move(buffer_);
      buffer_.clear();
      depth_ = 0;
      if (absl::Status st = sink(value); !st.ok()) {
        return st;
      }
    }
  }
  return absl::OkStatus();
}

const char* JsonTypeName(const Value& v) {
  if (v.IsMap()) {
    return "an object";
  }
  if (v.IsList()) {
    return "a list";
  }
  if (v.IsString()) {
    return "a string";
  }
  if (v.IsInt()) {
    return "a number";
  }
  if (v.IsBool()) {
    return "a boolean";
  }
  return "null";
}

const Value* Lookup(const Value& v, std::initializer_list<std::string_view> path) {
  const Value* at = &v;
  for (std::string_view key : path) {
    at = at->Find(key);
    if (at == nullptr) {
      return nullptr;
    }
  }
  return at;
}

std::string StringAt(const Value& v, std::initializer_list<std::string_view> path) {
  const Value* at = Lookup(v, path);
  return at != nullptr && at->IsString() ? at->AsString() : std::string();
}

int64_t IntAt(const Value& v, std::initializer_list<std::string_view> path) {
  const Value* at = Lookup(v, path);
  return at != nullptr && at->IsInt() ? at->AsInt() : 0;
}

Value With(const Value& v, std::string_view key, Value value) {
  Value::Map map = v.IsMap() ? v.AsMap() : Value::Map{};
  for (auto& [k, item] : map) {
    if (k == key) {
      item = std::move(value);
      return Value(std::move(map));
    }
  }
  map.emplace_back(std::string(key), std::move(value));
  return Value(std::move(map));
}

}  // namespace kmodd

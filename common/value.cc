#include "common/value.h"

#include <yaml-cpp/yaml.h>

#include <cstdio>

namespace kmodd {

Value& Value::Set(std::string key, Value v) {
  if (!IsMap()) {
    v_ = Map{};
  }
  auto& m = std::get<Map>(v_);
  m.emplace_back(std::move(key), std::move(v));
  return m.back().second;
}

Value& Value::Append(Value v) {
  if (!IsList()) {
    v_ = List{};
  }
  auto& l = std::get<List>(v_);
  l.push_back(std::move(v));
  return l.back();
}

const Value* Value::Find(std::string_view key) const {
  if (!IsMap()) {
    return nullptr;
  }
  for (const auto& [k, v] : AsMap()) {
    if (k == key) {
      return &v;
    }
  }
  return nullptr;
}

namespace {

void JsonString(std::string& out, std::string_view s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

void Json(std::string& out, const Value& v, int indent) {
  const std::string pad(static_cast<size_t>(indent + 2), ' ');
  const std::string close_pad(static_cast<size_t>(indent), ' ');
  if (v.IsNull()) {
    out += "null";
  } else if (v.IsBool()) {
    out += v.AsBool() ? "true" : "false";
  } else if (v.IsInt()) {
    out += std::to_string(v.AsInt());
  } else if (v.IsString()) {
    JsonString(out, v.AsString());
  } else if (v.IsList()) {
    if (v.AsList().empty()) {
      out += "[]";
      return;
    }
    out += "[\n";
    bool first = true;
    for (const auto& item : v.AsList()) {
      out += first ? "" : ",\n";
      first = false;
      out += pad;
      Json(out, item, indent + 2);
    }
    out += "\n" + close_pad + "]";
  } else {
    if (v.AsMap().empty()) {
      out += "{}";
      return;
    }
    out += "{\n";
    bool first = true;
    for (const auto& [k, item] : v.AsMap()) {
      out += first ? "" : ",\n";
      first = false;
      out += pad;
      JsonString(out, k);
      out += ": ";
      Json(out, item, indent + 2);
    }
    out += "\n" + close_pad + "}";
  }
}

// A plain YAML scalar that a YAML 1.1 or 1.2 reader would take for a bool, null or number
// must be quoted to stay a string.
bool NeedsQuotes(const std::string& s) {
  if (s.empty()) {
    return true;
  }
  YAML::Node n = YAML::Load(s);
  if (!n.IsScalar() || n.Scalar() != s) {
    return true;
  }
  bool b = false;
  double d = 0;
  if (YAML::convert<bool>::decode(n, b) || YAML::convert<double>::decode(n, d)) {
    return true;
  }
  static const char* const kSpecial[] = {"null", "Null", "NULL", "~", "y", "Y", "n", "N",
                                         "yes", "Yes", "YES", "no", "No", "NO", "on", "On",
                                         "ON", "off", "Off", "OFF"};
  for (const char* k : kSpecial) {
    if (s == k) {
      return true;
    }
  }
  return false;
}

void Yaml(YAML::Emitter& e, const Value& v) {
  if (v.IsNull()) {
    e << YAML::Null;
  } else if (v.IsBool()) {
    e << v.AsBool();
  } else if (v.IsInt()) {
    e << v.AsInt();
  } else if (v.IsString()) {
    bool quote = false;
    try {
      quote = NeedsQuotes(v.AsString());
    } catch (const YAML::Exception&) {
      quote = true;
    }
    if (quote) {
      e << YAML::DoubleQuoted << v.AsString();
    } else {
      e << v.AsString();
    }
  } else if (v.IsList()) {
    if (v.AsList().empty()) {
      e << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
      return;
    }
    e << YAML::BeginSeq;
    for (const auto& item : v.AsList()) {
      Yaml(e, item);
    }
    e << YAML::EndSeq;
  } else {
    if (v.AsMap().empty()) {
      e << YAML::Flow << YAML::BeginMap << YAML::EndMap;
      return;
    }
    e << YAML::BeginMap;
    for (const auto& [k, item] : v.AsMap()) {
      e << YAML::Key << k << YAML::Value;
      Yaml(e, item);
    }
    e << YAML::EndMap;
  }
}

}  // namespace

// One line, no spaces: log lines and event streams.
void JsonCompact(std::string& out, const Value& v) {
  if (v.IsList()) {
    out.push_back('[');
    bool first = true;
    for (const auto& item : v.AsList()) {
      out += first ? "" : ",";
      first = false;
      JsonCompact(out, item);
    }
    out.push_back(']');
  } else if (v.IsMap()) {
    out.push_back('{');
    bool first = true;
    for (const auto& [k, item] : v.AsMap()) {
      out += first ? "" : ",";
      first = false;
      JsonString(out, k);
      out.push_back(':');
      JsonCompact(out, item);
    }
    out.push_back('}');
  } else {
    Json(out, v, 0);  // scalars print the same either way
  }
}

std::string ToJsonLine(const Value& v) {
  std::string out;
  JsonCompact(out, v);
  return out;
}

std::string ToJson(const Value& v) {
  std::string out;
  Json(out, v, 0);
  out.push_back('\n');
  return out;
}

std::string ToYaml(const Value& v) {
  YAML::Emitter e;
  e.SetIndent(2);
  e.SetSeqFormat(YAML::Block);
  e.SetMapFormat(YAML::Block);
  Yaml(e, v);
  std::string out = e.c_str();
  out.push_back('\n');
  return out;
}

}  // namespace kmodd

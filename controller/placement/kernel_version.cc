#include "controller/placement/kernel_version.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kmodd::placement {

namespace {

bool IsNameStart(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }

const std::string* Lookup(const Vars& vars, std::string_view name) {
  for (const auto& [k, v] : vars) {
    if (k == name) {
      return &v;
    }
  }
  return nullptr;
}

absl::Status Unknown(std::string_view name, const Vars& vars) {
  std::vector<std::string> known;
  known.reserve(vars.size());
  for (const auto& kv : vars) {
    known.push_back(kv.first);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown variable $", std::string(name), "; known variables are ",
                   absl::StrJoin(known, ", "), " (or give a default: ${", std::string(name),
                   ":-value})"));
}

}  // namespace

std::string_view TrimKernelPlus(std::string_view kernel) {
  if (!kernel.empty() && kernel.back() == '+') {
    kernel.remove_suffix(1);
  }
  return kernel;
}

std::string NormalizeKernelVersion(std::string_view kernel) {
  std::string out(kernel);
  for (char& c : out) {
    if (!IsNameChar(c) && c != '-' && c != '.') {
      c = '_';
    }
  }
  return out;
}

absl::StatusOr<Vars> TemplateVars(std::string_view kernel, std::string_view module_name,
                                  std::string_view module_namespace) {
  const std::string norm = NormalizeKernelVersion(kernel);
  std::vector<std::string> parts;
  std::string cur;
  for (char c : norm) {
    if (c == '.' || c == ',' || c == '-') {
      parts.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  parts.push_back(std::move(cur));
  if (parts.size() < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel version \"", std::string(kernel),
                     "\" has fewer than three components (major.minor.patch)"));
  }
  return Vars{
      {"KERNEL_FULL_VERSION", norm},
      {"KERNEL_VERSION", norm},
      {"KERNEL_XYZ", absl::StrCat(parts[0], ".", parts[1], ".", parts[2])},
      {"KERNEL_X", parts[0]},
      {"KERNEL_Y", parts[1]},
      {"KERNEL_Z", parts[2]},
      {"MOD_NAME", std::string(module_name)},
      {"MOD_NAMESPACE", std::string(module_namespace)},
  };
}

absl::StatusOr<std::string> Substitute(std::string_view tmpl, const Vars& vars) {
  std::string out;
  out.reserve(tmpl.size() + 32);
  size_t i = 0;
  while (i < tmpl.size()) {
    const char c = tmpl[i];
    if (c != '$' || i + 1 >= tmpl.size()) {
      out.push_back(c);
      ++i;
      continue;
    }
    const char next = tmpl[i + 1];
    if (next == '$') {
      out.push_back('$');
      i += 2;
    } else if (IsNameStart(next)) {
      size_t end = i + 1;
      while (end < tmpl.size() && IsNameChar(tmpl[end])) {
        ++end;
      }
      const std::string_view name = tmpl.substr(i + 1, end - i - 1);
      const std::string* v = Lookup(vars, name);
      if (v == nullptr) {
        return Unknown(name, vars);
      }
      out += *v;
      i = end;
    } else if (next == '{') {
      const size_t close = tmpl.find('}', i + 2);
      if (close == std::string_view::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("unterminated \"${\" at offset ", i, "; close it with '}'"));
      }
      const std::string_view body = tmpl.substr(i + 2, close - i - 2);
      size_t n = 0;
      while (n < body.size() && IsNameChar(body[n])) {
        ++n;
      }
      const std::string_view name = body.substr(0, n);
      const std::string_view rest = body.substr(n);
      if (name.empty() || !IsNameStart(name[0])) {
        return absl::InvalidArgumentError(
            absl::StrCat("\"${", std::string(body), "}\" does not start with a variable name"));
      }
      const std::string* v = Lookup(vars, name);
      if (rest.empty()) {
        if (v == nullptr) {
          return Unknown(name, vars);
        }
        out += *v;
      } else if (rest.substr(0, 2) == ":-") {
        out += (v != nullptr && !v->empty()) ? *v : std::string(rest.substr(2));
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("\"${", std::string(body), "}\": only ${VAR} and ${VAR:-default} are supported"));
      }
      i = close + 1;
    } else {
      out.push_back(c);
      ++i;
    }
  }
  return out;
}

}  // namespace kmodd::placement

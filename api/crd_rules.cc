#include "api/crd_rules.h"

#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "api/names.h"

namespace kmodd::api {

namespace internal {
// crd_rules.yaml's text, in the file CMake writes from it (crd_rules_text.cc.in).
extern const char kCrdRulesText[];
}  // namespace internal

namespace {

using Kind = CrdRule::Kind;

constexpr std::pair<const char*, Kind> kKinds[] = {
    {"required", Kind::kRequired}, {"minItems", Kind::kMinItems}, {"maxItems", Kind::kMaxItems},
    {"pattern", Kind::kPattern},   {"default", Kind::kDefault},   {"exclusive", Kind::kExclusive},
};

// "a{,.b}.c" -> "a.c", "a.b.c": each {x,y} is one choice among its alternatives.
absl::StatusOr<std::vector<std::string>> Expand(const std::string& path) {
  const size_t open = path.find('{');
  if (open == std::string::npos) {
    if (path.find('}') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": '}' without '{'"));
    }
    return std::vector<std::string>{path};
  }
  const size_t close = path.find('}', open);
  if (close == std::string::npos || path.find('{', open + 1) < close) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": unbalanced or nested '{'"));
  }
  std::vector<std::string> out;
  for (absl::string_view alt : absl::StrSplit(path.substr(open + 1, close - open - 1), ',')) {
    auto rest = Expand(absl::StrCat(path.substr(0, open), alt, path.substr(close + 1)));
    if (!rest.ok()) {
      return rest.status();
    }
    out.insert(out.end(), rest->begin(), rest->end());
  }
  return out;
}

// "a.b[].c" -> {"a", "b", "[]", "c"}: a key per field, "[]" for every item of a list.
std::vector<std::string> Segments(const std::string& path) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    if (absl::EndsWith(part, "[]")) {
      out.emplace_back(part.substr(0, part.size() - 2));
      out.emplace_back("[]");
    } else {
      out.emplace_back(part);
    }
  }
  return out;
}

absl::Status ReadRuleValue(const YAML::Node& entry, const char* key, CrdRule& r) {
  const YAML::Node v = entry[key];
  switch (r.kind) {
    case Kind::kRequired:
      return v.as<bool>() ? absl::OkStatus()
                          : absl::InvalidArgumentError("required: false is not a rule");
    case Kind::kMinItems:
    case Kind::kMaxItems:
      r.items = v.as<int64_t>();
      return absl::OkStatus();
    case Kind::kPattern:
      r.value = v.as<std::string>();
      if (auto re = std::make_shared<RE2>(r.value, RE2::Quiet); re->ok()) {
        r.re = std::move(re);
        return absl::OkStatus();
      }
      return absl::InvalidArgumentError(absl::StrCat("pattern ", r.value, " does not compile"));
    case Kind::kDefault:
      r.value = v.as<std::string>();
      return absl::OkStatus();
    case Kind::kExclusive:
      r.keys = v.as<std::vector<std::string>>();
      r.message = entry["message"].as<std::string>("");
      return r.keys.size() == 2 && !r.message.empty()
                 ? absl::OkStatus()
                 : absl::InvalidArgumentError("exclusive takes two fields and a message");
  }
  return absl::InternalError("unknown rule kind");
}

absl::StatusOr<std::vector<CrdRule>> ParseEntry(const YAML::Node& entry) {
  CrdRule rule;
  const char* kind_key = nullptr;
  for (const auto& [key, kind] : kKinds) {
    if (entry[key].IsDefined()) {
      if (kind_key != nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("both ", kind_key, " and ", key));
      }
      kind_key = key;
      rule.kind = kind;
    }
  }
  if (kind_key == nullptr) {
    return absl::InvalidArgumentError("no rule (required, minItems, ... or exclusive)");
  }
  if (absl::Status st = ReadRuleValue(entry, kind_key, rule); !st.ok()) {
    return st;
  }
  rule.hint = entry["hint"].as<std::string>("");
  if (rule.hint.empty() && rule.kind != Kind::kDefault) {
    return absl::InvalidArgumentError("no hint: say what to write instead");
  }
  auto paths = Expand(entry["path"].as<std::string>());
  if (!paths.ok()) {
    return paths.status();
  }
  std::vector<CrdRule> out;
  for (std::string& path : *paths) {
    if (path.empty() || absl::EndsWith(path, "[]")) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": a rule names a field"));
    }
    out.push_back(rule);
    out.back().path = std::move(path);
  }
  return out;
}

// Calls visit(node, path) for the node at the end of segs[i...] from `node`, for every
// item where a segment is "[]". An absent, null or mistyped step ends the walk: the
// decoder reports types, and the API server checks no rule under an unset field.
template <typename Visit>
void Walk(const YAML::Node& node, const std::vector<std::string>& segs, size_t i,
          const std::string& path, Visit& visit) {
  if (i == segs.size()) {
    visit(node, path);
    return;
  }
  if (IsAbsentOrNull(node)) {
    return;
  }
  if (segs[i] == "[]") {
    if (node.IsSequence()) {
      for (size_t k = 0; k < node.size(); ++k) {
        Walk(node[k], segs, i + 1, absl::StrCat(path, "[", k, "]"), visit);
      }
    }
    return;
  }
  if (node.IsMap()) {
    const YAML::Node& const_node = node;  // a lookup that inserts nothing
    Walk(const_node[segs[i]], segs, i + 1, path.empty() ? segs[i] : path + "." + segs[i], visit);
  }
}

// Calls visit(parent, field, path) for every object holding the rule's field.
template <typename Visit>
void ForEachParent(const YAML::Node& module, const CrdRule& rule, Visit&& visit) {
  std::vector<std::string> segs = Segments(rule.path);
  const std::string field = segs.back();
  segs.pop_back();
  auto at_parent = [&](const YAML::Node& parent, const std::string& path) {
    if (parent.IsDefined() && parent.IsMap()) {  // yaml-cpp throws on IsMap of a missing node
      visit(parent, field, path.empty() ? field : path + "." + field);
    }
  };
  Walk(module, segs, 0, "", at_parent);
}

std::string Items(size_t n) { return absl::StrCat(n, n == 1 ? " item" : " items"); }

// The problem with `value` under `rule`, or "".
std::string Problem(const CrdRule& rule, const YAML::Node& value) {
  const bool set = !IsAbsentOrNull(value);
  switch (rule.kind) {
    case Kind::kRequired:
      if (!value.IsDefined()) {
        return "missing; " + rule.hint;
      }
      return set ? "" : "is null (YAML reads a key with no value, or whose entries are all "
                        "commented out, as null); " + rule.hint;
    case Kind::kMinItems:
      if (set && value.IsSequence() && static_cast<int64_t>(value.size()) < rule.items) {
        return absl::StrCat("lists ", Items(value.size()), "; at least ", rule.items,
                            " required; ", rule.hint);
      }
      return "";
    case Kind::kMaxItems:
      if (set && value.IsSequence() && static_cast<int64_t>(value.size()) > rule.items) {
        return absl::StrCat("lists ", Items(value.size()), "; at most ", rule.items,
                            " allowed; ", rule.hint);
      }
      return "";
    case Kind::kPattern:
      if (set && value.IsScalar() && !RE2::PartialMatch(value.Scalar(), *rule.re)) {
        return absl::StrCat(Quote(value.Scalar()), " does not match ", rule.value, "; ",
                            rule.hint);
      }
      return "";
    case Kind::kExclusive:
      if (set && value.IsMap() && !IsAbsentOrNull(value[rule.keys[0]]) &&
          !IsAbsentOrNull(value[rule.keys[1]])) {
        return absl::StrCat(rule.message, "; ", rule.hint);
      }
      return "";
    case Kind::kDefault:
      return "";
  }
  return "";
}

}  // namespace

absl::StatusOr<std::vector<CrdRule>> ParseCrdRules(std::string_view text) {
  std::vector<CrdRule> rules;
  try {
    const YAML::Node doc = YAML::Load(std::string(text));
    for (const YAML::Node& entry : doc["rules"]) {
      auto parsed = ParseEntry(entry);
      if (!parsed.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "CRD rule at line ", entry.Mark().line + 1, ": ", parsed.status().message()));
      }
      rules.insert(rules.end(), parsed->begin(), parsed->end());
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("CRD rules: ", e.what()));
  }
  return rules;
}

const absl::StatusOr<std::vector<CrdRule>>& CrdRules() {
  // Leaked on purpose, like the patterns in names.cc: no destructor races a reader.
  static const auto& rules =
      *new absl::StatusOr<std::vector<CrdRule>>(ParseCrdRules(internal::kCrdRulesText));
  return rules;
}

void ApplyCrdDefaults(YAML::Node& module) {
  if (!CrdRules().ok()) {
    return;  // CheckCrdRules refuses the Module
  }
  for (const CrdRule& rule : *CrdRules()) {
    if (rule.kind != Kind::kDefault) {
      continue;
    }
    ForEachParent(module, rule, [&](const YAML::Node& parent, const std::string& field,
                                    const std::string& /*path*/) {
      if (IsAbsentOrNull(parent[field])) {
        YAML::Node writable = parent;  // shares the document's node
        writable[field] = rule.value;
      }
    });
  }
}

void CheckCrdRules(const YAML::Node& module, size_t first_error, ReadContext& ctx) {
  if (!CrdRules().ok()) {
    ctx.Error(module, "",
              absl::StrCat("kmodd was built with broken CRD rules: ", CrdRules().status().message()));
    return;
  }
  // The API server evaluates CEL rules (exclusive) only on an object that passed the rest of
  // its schema, types included; so does this.
  for (const bool cel : {false, true}) {
    if (cel && ctx.errors.size() != first_error) {
      return;
    }
    for (const CrdRule& rule : *CrdRules()) {
      if ((rule.kind == Kind::kExclusive) != cel) {
        continue;
      }
      ForEachParent(module, rule, [&](const YAML::Node& parent, const std::string& field,
                                      const std::string& path) {
        const YAML::Node value = parent[field];
        if (std::string problem = Problem(rule, value); !problem.empty()) {
          ctx.Error(value.IsDefined() ? value : parent, path, problem);
        }
      });
    }
  }
}

}  // namespace kmodd::api

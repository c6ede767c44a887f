#include "api/module_policy.h"

#include <charconv>

#include "absl/strings/str_cat.h"
#include "api/names.h"

namespace kmodd::api {

std::string NodeAmount::ToString() const {
  return percent ? absl::StrCat(*percent, "%") : absl::StrCat(count);
}

std::optional<NodeAmount> ParseNodeAmount(const std::string& text, std::string& error) {
  static constexpr char kExpected[] =
      "expected a number of nodes (\"3\") or a percentage of the selected nodes (\"25%\")";
  std::string digits = text;
  const bool percent = !digits.empty() && digits.back() == '%';
  if (percent) {
    digits.pop_back();
  }
  int64_t v = 0;
  const char* end = digits.data() + digits.size();
  auto [ptr, ec] = std::from_chars(digits.data(), end, v);
  if (digits.empty() || ec != std::errc() || ptr != end || v < 0) {
    error = absl::StrCat(Quote(text), ": ", kExpected);
    return std::nullopt;
  }
  NodeAmount a;
  if (percent) {
    if (v > 100) {
      error = absl::StrCat(Quote(text), ": a percentage is at most 100%");
      return std::nullopt;
    }
    a.percent = static_cast<int>(v);
  } else {
    a.count = v;
  }
  return a;
}

std::vector<FieldError> ValidateModulePolicy(const ModulePolicy& p) {
  std::vector<FieldError> out;
  if (p.module_name.empty()) {
    out.push_back({"spec.moduleName", "required: the name of the Module in this namespace"});
  } else if (!IsDnsSubdomain(p.module_name)) {
    out.push_back({"spec.moduleName",
                   absl::StrCat(Quote(p.module_name), " is not a Module name (a lowercase RFC "
                                "1123 subdomain)")});
  }
  const RolloutSpec& r = p.rollout;
  if (r.max_parallel && !r.max_parallel->percent && r.max_parallel->count == 0) {
    out.push_back({"spec.rollout.maxParallel",
                   "0 would never update a node; use at least 1, or pause the rollout"});
  }
  if (r.max_parallel && r.max_parallel->percent && *r.max_parallel->percent == 0) {
    out.push_back({"spec.rollout.maxParallel",
                   "0% would never update a node; use at least 1%, or pause the rollout"});
  }
  if (r.canary_count < 0) {
    out.push_back({"spec.rollout.canary.count", "must not be negative"});
  }
  if (r.canary_count > 0 && !r.canary_selector.empty()) {
    out.push_back({"spec.rollout.canary",
                   "give either count or selector, not both: which nodes are the canaries "
                   "would be ambiguous"});
  }
  for (const auto& [k, v] : r.canary_selector) {
    if (std::string problem = QualifiedNameProblem(k); !problem.empty()) {
      out.push_back({absl::StrCat("spec.rollout.canary.selector.", k), problem});
    }
    if (!v.empty() && !IsLabelName(v)) {
      out.push_back({absl::StrCat("spec.rollout.canary.selector.", k),
                     absl::StrCat(Quote(v), " is not a valid label value")});
    }
  }
  if (r.canary_soak_seconds && *r.canary_soak_seconds < 0) {
    out.push_back({"spec.rollout.canary.soakSeconds", "must not be negative"});
  }
  if (r.canary_soak_seconds && *r.canary_soak_seconds > 30LL * 24 * 3600) {
    out.push_back({"spec.rollout.canary.soakSeconds",
                   "at most 2592000 (30 days); pause the rollout for longer"});
  }
  if (r.canary_count == 0 && r.canary_selector.empty() &&
      (r.canary_soak_seconds || !r.canary_pause)) {
    out.push_back({"spec.rollout.canary",
                   "pause or soakSeconds without count or selector: say which nodes are the "
                   "canaries"});
  }
  if (p.drain) {
    const DrainSpec& d = *p.drain;
    for (size_t i = 0; i < d.resources.size(); ++i) {
      if (std::string problem = QualifiedNameProblem(d.resources[i]); !problem.empty()) {
        out.push_back({absl::StrCat("spec.drain.resources[", i, "]"),
                       absl::StrCat(Quote(d.resources[i]), " is not a resource name: ", problem)});
      } else if (d.resources[i].find('/') == std::string::npos) {
        out.push_back({absl::StrCat("spec.drain.resources[", i, "]"),
                       absl::StrCat(Quote(d.resources[i]), " is not an extended resource "
                                    "(a device plugin's resource is domain/name, e.g. example.com/gpu)")});
      }
    }
    for (const auto& [k, v] : d.pod_selector) {
      if (std::string problem = QualifiedNameProblem(k); !problem.empty()) {
        out.push_back({absl::StrCat("spec.drain.podSelector.", k), problem});
      }
      if (!v.empty() && !IsLabelName(v)) {
        out.push_back({absl::StrCat("spec.drain.podSelector.", k),
                       absl::StrCat(Quote(v), " is not a valid label value")});
      }
    }
    if (d.timeout_seconds < 1 || d.timeout_seconds > int64_t{24} * 3600) {
      out.push_back({"spec.drain.timeoutSeconds",
                     absl::StrCat(d.timeout_seconds, ": expected 1 to 86400")});
    }
  }
  for (FieldError& e : ValidateReadinessChecks(p.readiness, "spec.readiness.checks")) {
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace kmodd::api

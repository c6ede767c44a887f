#include "controller/server/report_filter.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace kmodd::server {

namespace {

bool Has(const std::set<std::string>* s, const std::string& key) {
  return s != nullptr && s->count(key) != 0;
}

}  // namespace

FilteredReport FilterReport(std::vector<ReportedModule> reported, const ReportScope& scope) {
  static const std::vector<ReportedModule> kNone;
  const std::vector<ReportedModule>& last = scope.last != nullptr ? *scope.last : kNone;
  auto before = last.begin();  // walks `last` alongside: both are sorted
  std::optional<std::vector<std::string>> planned;
  FilteredReport out;
  out.accepted.reserve(reported.size());
  for (ReportedModule& m : reported) {
    while (before != last.end() && before->key < m.key) {
      ++before;
    }
    bool ok = (before != last.end() && before->key == m.key) || Has(scope.sent, m.key) ||
              Has(scope.inherited, m.key);
    if (!ok && scope.planned) {
      if (!planned) {
        planned = scope.planned();
      }
      ok = std::binary_search(planned->begin(), planned->end(), m.key);
    }
    if (ok) {
      out.accepted.push_back(std::move(m));
      continue;
    }
    if (out.ignored++ < FilteredReport::kExamples) {
      out.examples.push_back(m.key);
    }
  }
  return out;
}

std::vector<PhaseChange> PhaseChanges(const std::vector<ReportedModule>& before,
                                      const std::vector<ReportedModule>& after) {
  std::vector<PhaseChange> out;
  auto b = before.begin();
  auto a = after.begin();
  while (b != before.end() || a != after.end()) {
    if (a == after.end() || (b != before.end() && b->key < a->key)) {
      out.push_back({b->key, "Gone", "", ""});
      ++b;
    } else if (b == before.end() || a->key < b->key) {
      out.push_back({a->key, api::PhaseName(a->phase), a->version, a->image});
      ++a;
    } else {
      if (a->phase != b->phase || a->version != b->version || a->image != b->image) {
        out.push_back({a->key, api::PhaseName(a->phase), a->version, a->image});
      }
      ++a;
      ++b;
    }
  }
  return out;
}

}  // namespace kmodd::server

#include "tools/agentctl/table.h"

#include "absl/strings/str_join.h"

namespace kmodd::agentctl {

std::string JoinOrNone(const std::vector<std::string>& items) {
  return items.empty() ? "<none>" : absl::StrJoin(items, ", ");
}

std::string OrNone(const std::string& s) { return s.empty() ? "<none>" : s; }

}  // namespace kmodd::agentctl

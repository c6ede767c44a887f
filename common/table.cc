#include "common/table.h"

#include <algorithm>

namespace kmodd {

std::string RenderTable(const std::vector<TableRow>& rows) {
  if (rows.empty()) {
    return "";
  }
  const size_t columns = rows.front().size();
  std::vector<size_t> widths(columns, 0);
  for (const auto& r : rows) {
    for (size_t c = 0; c < columns && c < r.size(); ++c) {
      widths[c] = std::max(widths[c], r[c].size());
    }
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t c = 0; c < columns; ++c) {
      const std::string& cell = c < r.size() ? r[c] : std::string();
      line += cell;
      if (c + 1 < columns) {
        line.append(widths[c] - cell.size() + 3, ' ');
      }
    }
    // The last column may be empty (a message); never leave padding behind it.
    line.erase(line.find_last_not_of(' ') + 1);
    out += line;
    out += '\n';
  }
  return out;
}

}  // namespace kmodd

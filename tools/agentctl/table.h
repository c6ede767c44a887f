#pragma once

// Cells for the tables agentctl prints (common/table.h lays them out).

#include <string>
#include <vector>

#include "common/table.h"

namespace kmodd::agentctl {

using Row = TableRow;
using kmodd::RenderTable;

// "a, b, c", or "<none>" for an empty list.
std::string JoinOrNone(const std::vector<std::string>& items);

// The value, or "<none>" when it is empty (kubectl's spelling of an unset field).
std::string OrNone(const std::string& s);

}  // namespace kmodd::agentctl

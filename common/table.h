#pragma once

// Human tables as kubectl prints them: left-aligned columns three spaces apart, the header
// first, no trailing spaces. Shared by kmodd-controller's and agentctl's table outputs.

#include <string>
#include <vector>

namespace kmodd {

using TableRow = std::vector<std::string>;

// rows[0] is the header. Rows shorter than the header are padded with empty cells.
std::string RenderTable(const std::vector<TableRow>& rows);

}  // namespace kmodd

#pragma once

// Human tables as kubectl prints them: left-aligned columns three spaces apart, upper-case
// headers, no trailing spaces.

#include <string>
#include <vector>

namespace kmodd::agentctl {

using Row = std::vector<std::string>;

// rows[0] is the header. Rows shorter than the header are padded with empty cells.
std::string RenderTable(const std::vector<Row>& rows);

// "a, b, c", or "<none>" for an empty list.
std::string JoinOrNone(const std::vector<std::string>& items);

// The value, or "<none>" when it is empty (kubectl's spelling of an unset field).
std::string OrNone(const std::string& s);

}  // namespace kmodd::agentctl

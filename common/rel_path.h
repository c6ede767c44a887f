#pragma once

// Relative paths as strings, "/"-separated: splitting and joining, no I/O. The vocabulary of
// common/beneath.h, and of the image's own path rules (common/oci/layer_path.h).

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kmodd {

// The non-empty components of a path ("a//b/" -> {"a", "b"}; "" -> {}).
std::vector<std::string_view> Components(std::string_view path);

// {"a", "b"} -> "a/b": the path Components split, without its empty components.
std::string JoinComponents(const std::vector<std::string_view>& names);

// "a/b/c" -> {"a/b", "c"}; "c" -> {"", "c"}.
std::pair<std::string, std::string> SplitParent(std::string_view rel);
// The same as views into `rel`, for the hot paths that only look.
std::pair<std::string_view, std::string_view> SplitParentView(std::string_view rel);

// "a/b" -> {"a", "a/b"}: every directory prefix, outermost first ("" -> {}).
std::vector<std::string> DirPrefixes(std::string_view rel_dir);

// `rel` beneath `root`, for messages and prefixes: "root/rel"; either may be empty.
std::string JoinPath(std::string_view root, std::string_view rel);

}  // namespace kmodd

#include "common/rel_path.h"

namespace kmodd {

std::vector<std::string_view> Components(std::string_view path) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) {
      end = path.size();
    }
    if (end > start) {
      out.push_back(path.substr(start, end - start));
    }
    start = end + 1;
  }
  return out;
}

std::pair<std::string_view, std::string_view> SplitParentView(std::string_view rel) {
  const size_t slash = rel.rfind('/');
  if (slash == std::string_view::npos) {
    return {std::string_view(), rel};
  }
  return {rel.substr(0, slash), rel.substr(slash + 1)};
}

std::pair<std::string, std::string> SplitParent(std::string_view rel) {
  const auto [parent, base] = SplitParentView(rel);
  return {std::string(parent), std::string(base)};
}

std::string JoinComponents(const std::vector<std::string_view>& names) {
  std::string out;
  for (const std::string_view n : names) {
    if (!out.empty()) {
      out.push_back('/');
    }
    out.append(n);
  }
  return out;
}

std::vector<std::string> DirPrefixes(std::string_view rel_dir) {
  std::vector<std::string> out;
  if (rel_dir.empty()) {
    return out;
  }
  for (size_t i = 0; i <= rel_dir.size(); ++i) {
    if (i == rel_dir.size() || rel_dir[i] == '/') {
      out.emplace_back(rel_dir.substr(0, i));
    }
  }
  return out;
}

std::string JoinPath(std::string_view root, std::string_view rel) {
  if (rel.empty()) {
    return std::string(root);
  }
  if (root.empty()) {
    return std::string(rel);
  }
  std::string out(root);
  if (root.back() != '/') {
    out.push_back('/');
  }
  out.append(rel);
  return out;
}

}  // namespace kmodd

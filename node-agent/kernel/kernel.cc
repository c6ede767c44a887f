#include "node-agent/kernel/kernel.h"

#include <algorithm>

namespace kmodd::kernel {

std::string CanonicalModuleName(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

const LoadedModule* KernelState::Find(const std::string& name) const {
  const std::string canon = CanonicalModuleName(name);
  auto it = std::lower_bound(modules.begin(), modules.end(), canon,
                             [](const LoadedModule& m, const std::string& n) { return m.name < n; });
  return it != modules.end() && it->name == canon ? &*it : nullptr;
}

}  // namespace kmodd::kernel

// agentctl get NAMESPACE/NAME: one module's full status (yaml unless -o json).

#include <optional>

#include "absl/strings/str_cat.h"
#include "tools/agentctl/command.h"
#include "tools/agentctl/proto_value.h"

namespace kmodd::agentctl {

int GetCommand(const Context& ctx, const std::vector<std::string>& args) {
  std::string module;
  flags::FlagSet flags("agentctl get", ctx.usage);
  flags.Positional("NAMESPACE/NAME", "the Module's namespace and name", &module);
  if (std::optional<int> exit = ctx.Parse(flags, args)) {
    return *exit;
  }
  auto ref = ParseModuleRef(module);
  if (!ref.ok()) {
    return ctx.Usage(std::string(ref.status().message()));
  }
  auto client = ctx.Dial();
  if (!client.ok()) {
    return ctx.Fail(client.status());
  }
  auto status = (*client)->Status();
  if (!status.ok()) {
    return ctx.Fail(status.status());
  }
  for (const auto& m : status->modules()) {
    if (m.namespace_() == ref->first && m.name() == ref->second) {
      PrintValue(ctx, MessageValue(m));
      return 0;
    }
  }
  return ctx.Fail(absl::NotFoundError(
      absl::StrCat("module ", ref->first, "/", ref->second, " not found on this node")));
}

}  // namespace kmodd::agentctl

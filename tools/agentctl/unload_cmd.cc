// agentctl unload NAMESPACE/NAME: a debugging override; the next desired state replaces it.

#include <optional>

#include "tools/agentctl/command.h"

namespace kmodd::agentctl {

int UnloadCommand(const Context& ctx, const std::vector<std::string>& args) {
  std::string module;
  flags::FlagSet flags("agentctl unload", ctx.usage);
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
  auto resp = (*client)->Unload(ref->first, ref->second);
  if (!resp.ok()) {
    return ctx.Fail(resp.status());
  }
  ctx.out << ref->first << "/" << ref->second << ": " << resp->message() << "\n";
  return 0;
}

}  // namespace kmodd::agentctl

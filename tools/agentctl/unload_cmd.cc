// agentctl unload NAMESPACE/NAME: a debugging override; the next desired state replaces it.

#include "tools/agentctl/command.h"

namespace kmodd::agentctl {

int UnloadCommand(const Context& ctx, const std::vector<std::string>& args) {
  auto parsed = ParseArgs(args, {}, {});
  if (!parsed.ok()) {
    return ctx.Usage(std::string(parsed.status().message()));
  }
  if (parsed->positional.size() != 1) {
    return ctx.Usage("usage: agentctl unload NAMESPACE/NAME");
  }
  auto ref = ParseModuleRef(parsed->positional[0]);
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

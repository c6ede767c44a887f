// agentctl status: the node, the controller link and every module's phase.

#include "absl/time/clock.h"
#include "tools/agentctl/command.h"
#include "tools/agentctl/format.h"
#include "tools/agentctl/proto_value.h"

namespace kmodd::agentctl {

int StatusCommand(const Context& ctx, const std::vector<std::string>& args) {
  auto parsed = ParseArgs(args, {}, {});
  if (!parsed.ok()) {
    return ctx.Usage(std::string(parsed.status().message()));
  }
  if (!parsed->positional.empty()) {
    return ctx.Usage("status takes no arguments (agentctl get NAMESPACE/NAME shows one module)");
  }
  auto client = ctx.Dial();
  if (!client.ok()) {
    return ctx.Fail(client.status());
  }
  auto status = (*client)->Status();
  if (!status.ok()) {
    return ctx.Fail(status.status());
  }
  if (ctx.output == "yaml" || ctx.output == "json") {
    PrintValue(ctx, MessageValue(*status));
    return 0;
  }
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  ctx.out << StatusHeader(*status, now_ms) << StatusTable(*status, now_ms, ctx.output == "wide");
  return 0;
}

}  // namespace kmodd::agentctl

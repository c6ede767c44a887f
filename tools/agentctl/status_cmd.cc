// agentctl status: the node, the controller link and every module's phase.

#include <optional>

#include "absl/time/clock.h"
#include "tools/agentctl/command.h"
#include "tools/agentctl/format.h"
#include "tools/agentctl/proto_value.h"

namespace kmodd::agentctl {

int StatusCommand(const Context& ctx, const std::vector<std::string>& args) {
  flags::FlagSet flags("agentctl status", ctx.usage);
  if (std::optional<int> exit = ctx.Parse(flags, args)) {
    return *exit;
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

// agentctl plan: what the agent would do now, without doing it.

#include <optional>

#include "tools/agentctl/command.h"
#include "tools/agentctl/format.h"
#include "tools/agentctl/proto_value.h"

namespace kmodd::agentctl {

int PlanCommand(const Context& ctx, const std::vector<std::string>& args) {
  flags::FlagSet flags("agentctl plan", ctx.usage);
  if (std::optional<int> exit = ctx.Parse(flags, args)) {
    return *exit;
  }
  auto client = ctx.Dial();
  if (!client.ok()) {
    return ctx.Fail(client.status());
  }
  auto plan = (*client)->PreviewPass();
  if (!plan.ok()) {
    return ctx.Fail(plan.status());
  }
  if (!ctx.output.empty()) {
    PrintValue(ctx, MessageValue(*plan));
  } else {
    ctx.out << PlanText(*plan);
  }
  return 0;
}

}  // namespace kmodd::agentctl

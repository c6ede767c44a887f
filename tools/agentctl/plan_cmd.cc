// agentctl plan: what the agent would do now, without doing it.

#include "tools/agentctl/command.h"
#include "tools/agentctl/format.h"
#include "tools/agentctl/proto_value.h"

namespace kmodd::agentctl {

int PlanCommand(const Context& ctx, const std::vector<std::string>& args) {
  auto parsed = ParseArgs(args, {}, {});
  if (!parsed.ok()) {
    return ctx.Usage(std::string(parsed.status().message()));
  }
  if (!parsed->positional.empty()) {
    return ctx.Usage("plan takes no arguments");
  }
  auto client = ctx.Dial();
  if (!client.ok()) {
    return ctx.Fail(client.status());
  }
  auto plan = (*client)->Plan();
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

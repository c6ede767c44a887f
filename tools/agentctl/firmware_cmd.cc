// agentctl firmware: the firmware files kmodd staged, and the modules that own each.

#include <optional>

#include "tools/agentctl/command.h"
#include "tools/agentctl/format.h"
#include "tools/agentctl/proto_value.h"

namespace kmodd::agentctl {

int FirmwareCommand(const Context& ctx, const std::vector<std::string>& args) {
  flags::FlagSet flags("agentctl firmware", ctx.usage);
  if (std::optional<int> exit = ctx.Parse(flags, args)) {
    return *exit;
  }
  auto client = ctx.Dial();
  if (!client.ok()) {
    return ctx.Fail(client.status());
  }
  auto fw = (*client)->Firmware();
  if (!fw.ok()) {
    return ctx.Fail(fw.status());
  }
  if (!ctx.output.empty()) {
    PrintValue(ctx, MessageValue(*fw));
  } else {
    ctx.out << FirmwareText(*fw);
  }
  return 0;
}

}  // namespace kmodd::agentctl

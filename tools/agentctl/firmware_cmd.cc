// agentctl firmware: the firmware files kmodd staged, and the modules that own each.

#include "tools/agentctl/command.h"
#include "tools/agentctl/format.h"
#include "tools/agentctl/proto_value.h"

namespace kmodd::agentctl {

int FirmwareCommand(const Context& ctx, const std::vector<std::string>& args) {
  auto parsed = ParseArgs(args, {}, {});
  if (!parsed.ok()) {
    return ctx.Usage(std::string(parsed.status().message()));
  }
  if (!parsed->positional.empty()) {
    return ctx.Usage("firmware takes no arguments");
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

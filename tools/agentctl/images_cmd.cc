// agentctl images [--prune]: the agent's image cache; --prune removes the trees no module
// uses and lists them.

#include <optional>

#include "tools/agentctl/command.h"
#include "tools/agentctl/format.h"
#include "tools/agentctl/proto_value.h"

namespace kmodd::agentctl {

int ImagesCommand(const Context& ctx, const std::vector<std::string>& args) {
  bool prune = false;
  flags::FlagSet flags("agentctl images", ctx.usage);
  flags.Switch("--prune", "remove the trees no module uses, and list them", &prune);
  if (std::optional<int> exit = ctx.Parse(flags, args)) {
    return *exit;
  }
  auto client = ctx.Dial();
  if (!client.ok()) {
    return ctx.Fail(client.status());
  }
  auto images = (*client)->Images(prune);
  if (!images.ok()) {
    return ctx.Fail(images.status());
  }
  if (!ctx.output.empty()) {
    PrintValue(ctx, MessageValue(*images));
  } else {
    ctx.out << ImagesText(*images, prune);
  }
  return 0;
}

}  // namespace kmodd::agentctl

// agentctl load -f FILE: a debugging override that loads the module entries of FILE. The
// agent's answer says how long it holds: until the next desired state from the controller.

#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "tools/agentctl/command.h"
#include "tools/agentctl/module_file.h"

namespace kmodd::agentctl {

int LoadCommand(const Context& ctx, const std::vector<std::string>& args) {
  std::string file;
  flags::FlagSet flags("agentctl load", ctx.usage);
  flags.String("-f,--filename", "FILE", "a NodeModulesConfig module entry, or - for stdin", &file)
      .Needs("a path (a NodeModulesConfig module entry, or - for stdin)")
      .Required();
  if (std::optional<int> exit = ctx.Parse(flags, args)) {
    return *exit;
  }
  std::string text;
  if (file == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    text = ss.str();
  } else {
    std::ifstream in(file);
    if (!in) {
      return ctx.Fail(absl::NotFoundError(absl::StrCat("cannot read ", file)));
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  auto modules = ParseModuleFile(text, file == "-" ? "<stdin>" : file);
  if (!modules.ok()) {
    return ctx.Fail(modules.status());
  }
  auto client = ctx.Dial();
  if (!client.ok()) {
    return ctx.Fail(client.status());
  }
  for (const auto& m : *modules) {
    auto resp = (*client)->Load(m);
    if (!resp.ok()) {
      return ctx.Fail(resp.status());
    }
    ctx.out << m.namespace_() << "/" << m.name() << ": " << resp->message() << "\n";
  }
  return 0;
}

}  // namespace kmodd::agentctl

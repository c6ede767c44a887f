// agentctl's command table and global options (kmod's tools/kmod.c shape).

#include <iostream>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tools/agentctl/command.h"

namespace kmodd::agentctl {

namespace {

struct Command {
  const char* name;
  CommandFn run;
  const char* usage;
  const char* help;
  std::set<std::string> outputs;  // accepted -o values
};

const std::vector<Command>& Commands() {
  static const std::vector<Command> kCommands = {
      {"status", StatusCommand, "status [-o yaml|json|wide]",
       "the node, the controller link and every module's phase", {"yaml", "json", "wide"}},
      {"get", GetCommand, "get NAMESPACE/NAME [-o yaml|json]", "one module's full status",
       {"yaml", "json"}},
      {"events", EventsCommand, "events [-f] [--replay]",
       "recent events; -f follows new ones (with --replay, after the recent ones)", {}},
      {"plan", PlanCommand, "plan [-o yaml|json]", "what the agent would do now, without doing it",
       {"yaml", "json"}},
      {"load", LoadCommand, "load -f FILE",
       "load the module entries of FILE (debugging; the next desired state replaces it)", {}},
      {"unload", UnloadCommand, "unload NAMESPACE/NAME",
       "unload a module (debugging; the next desired state replaces it)", {}},
      {"firmware", FirmwareCommand, "firmware [-o yaml|json]", "staged firmware and its owners",
       {"yaml", "json"}},
      {"images", ImagesCommand, "images [--prune] [-o yaml|json]",
       "the image cache; --prune removes trees no module uses", {"yaml", "json"}},
  };
  return kCommands;
}

std::string Usage() {
  std::string usage = absl::StrCat(
      "usage: agentctl [--socket PATH] COMMAND [ARGS]\n\n"
      "Talks to the kmodd agent on this node (default socket ",
      kDefaultSocket, ", or $KMODD_AGENT_SOCKET).\n\ncommands:\n");
  for (const auto& c : Commands()) {
    const std::string name = c.name;
    absl::StrAppend(&usage, "  ", name, std::string(10 - name.size(), ' '), c.help, "\n");
  }
  return usage;
}

}  // namespace

int Context::Fail(const absl::Status& s) const {
  err << "error: " << s.message() << "\n";
  return 1;
}

int Context::Usage(const std::string& message) const {
  err << "error: " << message << "\n";
  return 2;
}

std::optional<int> Context::Parse(flags::FlagSet& flags,
                                  const std::vector<std::string>& args) const {
  absl::StatusOr<flags::FlagSet::Outcome> outcome = flags.Parse(args);
  if (!outcome.ok()) {
    return Usage(std::string(outcome.status().message()));
  }
  if (*outcome == flags::FlagSet::Outcome::kHelp) {  // `agentctl COMMAND --help`
    out << flags.Help();
    return 0;
  }
  return std::nullopt;
}

absl::StatusOr<std::pair<std::string, std::string>> ParseModuleRef(const std::string& ref) {
  const size_t slash = ref.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == ref.size() ||
      ref.find('/', slash + 1) != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", ref, "\" is not NAMESPACE/NAME (a Module's namespace and name)"));
  }
  return std::pair{ref.substr(0, slash), ref.substr(slash + 1)};
}

int Run(const std::vector<std::string>& args, const std::string& default_socket,
        std::ostream& out, std::ostream& err) {
  // --socket and -o/--output are taken from anywhere on the line; the rest is the command's.
  std::string socket = default_socket;
  std::string output;
  std::vector<std::string> rest;
  flags::FlagSet globals("agentctl", Usage());
  globals.String("--socket", "PATH", "the agent's unix socket", &socket);
  globals.String("-o,--output", "FORMAT", "yaml, json (and wide for status)", &output);
  globals.PassUnknown(&rest);
  globals.Notes("`agentctl COMMAND --help` shows each command's usage.\n");
  absl::StatusOr<flags::FlagSet::Outcome> outcome = globals.Parse(args);
  if (!outcome.ok()) {
    err << "error: " << outcome.status().message() << "\n";
    return 2;
  }
  const bool help = *outcome == flags::FlagSet::Outcome::kHelp;
  if (rest.empty()) {
    (help ? out : err) << globals.Help();
    return help ? 0 : 2;
  }
  const std::string name = rest.front();
  rest.erase(rest.begin());
  for (const auto& c : Commands()) {
    if (name != c.name) {
      continue;
    }
    const std::string usage = absl::StrCat("usage: agentctl ", c.usage, "\n\n", c.help, "\n");
    if (help) {  // the command's own flags say what they do
      return c.run(Context{socket, "", usage, out, err}, {"--help"});
    }
    if (!output.empty() && c.outputs.count(output) == 0) {
      err << "error: " << name << " does not print -o " << output;
      if (!c.outputs.empty()) {
        err << " (it prints " << absl::StrJoin(c.outputs, ", ") << ")";
      }
      err << "\n";
      return 2;
    }
    const Context ctx{socket, output, usage, out, err};
    return c.run(ctx, rest);
  }
  err << "error: unknown command \"" << name << "\"\n" << globals.Help();
  return 2;
}

void PrintValue(const Context& ctx, const Value& v) {
  ctx.out << (ctx.output == "json" ? ToJson(v) : ToYaml(v));
}

}  // namespace kmodd::agentctl

// agentctl's command table and global options (kmod's tools/kmod.c shape).

#include <iostream>

#include "absl/strings/match.h"
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

void Usage(std::ostream& os) {
  os << "usage: agentctl [--socket PATH] COMMAND [ARGS]\n\n"
        "Talks to the kmodd agent on this node (default socket "
     << kDefaultSocket << ", or $KMODD_AGENT_SOCKET).\n\ncommands:\n";
  for (const auto& c : Commands()) {
    const std::string name = c.name;
    os << "  " << name << std::string(10 - name.size(), ' ') << c.help << "\n";
  }
  os << "\nglobal options:\n"
        "  --socket PATH     the agent's unix socket\n"
        "  -o, --output FMT  yaml, json (and wide for status)\n"
        "\n`agentctl COMMAND --help` shows each command's usage.\n";
}

// Takes --socket and -o/--output from anywhere on the line; the rest is the command's.
struct Globals {
  std::string socket;
  std::string output;
  bool help = false;
  std::vector<std::string> rest;
};

absl::StatusOr<Globals> ParseGlobals(const std::vector<std::string>& args,
                                     const std::string& default_socket) {
  Globals g;
  g.socket = default_socket;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto take = [&](const std::string& flag, std::string& into) -> absl::StatusOr<bool> {
      if (a == flag) {
        if (i + 1 >= args.size()) {
          return absl::InvalidArgumentError(absl::StrCat(flag, " needs a value"));
        }
        into = args[++i];
        return true;
      }
      if (absl::StartsWith(a, flag + "=")) {
        into = a.substr(flag.size() + 1);
        return true;
      }
      return false;
    };
    bool matched = false;
    for (const auto& [flag, into] : {std::pair<std::string, std::string*>{"--socket", &g.socket},
                                     {"-o", &g.output},
                                     {"--output", &g.output}}) {
      auto took = take(flag, *into);
      if (!took.ok()) {
        return took.status();
      }
      if (*took) {
        matched = true;
        break;
      }
    }
    if (matched) {
      continue;
    }
    if (a == "-h" || a == "--help") {
      g.help = true;
    } else {
      g.rest.push_back(a);
    }
  }
  if (g.socket.empty()) {
    return absl::InvalidArgumentError("--socket is empty");
  }
  return g;
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

std::string Args::Get(const std::string& flag) const {
  std::string v;
  for (const auto& [f, value] : values) {
    if (f == flag) {
      v = value;
    }
  }
  return v;
}

absl::StatusOr<Args> ParseArgs(const std::vector<std::string>& args,
                               const std::set<std::string>& bool_flags,
                               const std::set<std::string>& value_flags) {
  Args out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 2 || a[0] != '-') {
      out.positional.push_back(a);
      continue;
    }
    const size_t eq = a.find('=');
    const std::string flag = a.substr(0, eq);
    if (value_flags.count(flag) > 0) {
      if (eq != std::string::npos) {
        out.values.emplace_back(flag, a.substr(eq + 1));
      } else if (i + 1 < args.size()) {
        out.values.emplace_back(flag, args[++i]);
      } else {
        return absl::InvalidArgumentError(absl::StrCat(flag, " needs a value"));
      }
    } else if (bool_flags.count(flag) > 0 && eq == std::string::npos) {
      out.bools.insert(flag);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", a));
    }
  }
  return out;
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
  absl::StatusOr<Globals> g = ParseGlobals(args, default_socket);
  if (!g.ok()) {
    err << "error: " << g.status().message() << "\n";
    return 2;
  }
  if (g->rest.empty()) {
    Usage(g->help ? out : err);
    return g->help ? 0 : 2;
  }
  const std::string name = g->rest.front();
  const std::vector<std::string> rest(g->rest.begin() + 1, g->rest.end());
  for (const auto& c : Commands()) {
    if (name != c.name) {
      continue;
    }
    if (g->help) {
      out << "usage: agentctl " << c.usage << "\n\n" << c.help << "\n";
      return 0;
    }
    if (!g->output.empty() && c.outputs.count(g->output) == 0) {
      err << "error: " << name << " does not print -o " << g->output;
      if (!c.outputs.empty()) {
        err << " (it prints " << absl::StrJoin(c.outputs, ", ") << ")";
      }
      err << "\n";
      return 2;
    }
    const Context ctx{g->socket, g->output, out, err};
    return c.run(ctx, rest);
  }
  err << "error: unknown command \"" << name << "\"\n";
  Usage(err);
  return 2;
}

void PrintValue(const Context& ctx, const Value& v) {
  ctx.out << (ctx.output == "json" ? ToJson(v) : ToYaml(v));
}

}  // namespace kmodd::agentctl

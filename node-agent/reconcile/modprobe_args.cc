#include "node-agent/reconcile/modprobe_args.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kmodd::reconcile {

namespace {

struct Parsed {
  std::vector<std::string> words;  // non-option arguments
  std::optional<std::string> dir_name;
  bool remove = false;
  bool all = false;
};

// Options that change nothing for kmodd: it never runs install/remove commands, and its
// logging does not depend on them.
bool IsHarmless(const std::string& a) {
  return a == "-v" || a == "--verbose" || a == "-q" || a == "--quiet" || a == "-s" ||
         a == "--syslog" || a == "-i" || a == "--ignore-install" || a == "--ignore-remove";
}

absl::StatusOr<Parsed> Parse(const std::vector<std::string>& args, const std::string& field) {
  Parsed p;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.empty()) {
      continue;
    }
    if (a[0] != '-') {
      p.words.push_back(a);
    } else if (IsHarmless(a)) {
      continue;
    } else if (a == "-r" || a == "--remove") {
      p.remove = true;
    } else if (a == "-a" || a == "--all") {
      p.all = true;
    } else if (a == "-d" || a == "--dirname") {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat(field, ": ", a, " needs a directory"));
      }
      p.dir_name = args[++i];
    } else if (a.rfind("--dirname=", 0) == 0) {
      p.dir_name = a.substr(10);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": modprobe option \"", a,
          "\" is not supported by kmodd (supported: -v, -q, -s, -i, -d DIR, -a, and -r in "
          "unload); forcing, blacklists, dry runs and alternative configs are refused"));
    }
  }
  return p;
}

std::vector<std::string> LoadOrder(const api::ModprobeSpec& spec) {
  if (spec.modules_loading_order && !spec.modules_loading_order->empty()) {
    std::vector<std::string> order(spec.modules_loading_order->rbegin(),
                                   spec.modules_loading_order->rend());
    return order;
  }
  return {spec.module_name};
}

}  // namespace

absl::StatusOr<LoadCommand> InterpretLoad(const api::ModprobeSpec& spec) {
  LoadCommand c;
  c.dir_name = spec.EffectiveDirName();
  if (!spec.module_name.empty()) {
    if (spec.args) {
      auto p = Parse(spec.args->load, "modprobe.args.load");
      if (!p.ok()) {
        return p.status();
      }
      if (!p->words.empty() || p->remove || p->all) {
        return absl::InvalidArgumentError(absl::StrCat(
            "modprobe.args.load: \"", absl::StrJoin(p->words, " "),
            "\": args may only hold options; put module parameters in modprobe.parameters"));
      }
      if (p->dir_name) {
        c.dir_name = *p->dir_name;
      }
    }
    c.modules = LoadOrder(spec);
    c.main_module = spec.module_name;
    c.params = absl::StrJoin(spec.parameters, " ");
    return c;
  }
  if (!spec.raw_args || spec.raw_args->load.empty()) {
    return absl::InvalidArgumentError("modprobe: neither moduleName nor rawArgs.load is set");
  }
  auto p = Parse(spec.raw_args->load, "modprobe.rawArgs.load");
  if (!p.ok()) {
    return p.status();
  }
  if (p->remove) {
    return absl::InvalidArgumentError("modprobe.rawArgs.load: -r removes; it belongs in unload");
  }
  if (p->words.empty()) {
    return absl::InvalidArgumentError("modprobe.rawArgs.load: names no module");
  }
  if (p->dir_name) {
    c.dir_name = *p->dir_name;
  }
  if (p->all) {
    c.modules = p->words;  // modprobe -a loads each named module, in order
    c.main_module = p->words.front();
  } else {
    c.modules = {p->words.front()};
    c.main_module = p->words.front();
    std::vector<std::string> params(p->words.begin() + 1, p->words.end());
    for (const auto& param : params) {
      if (param.find('=') == std::string::npos && param.find('.') == std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(
            "modprobe.rawArgs.load: \"", param,
            "\" is neither an option nor a parameter (name=value); use -a to load several "
            "modules"));
      }
    }
    c.params = absl::StrJoin(params, " ");
  }
  return c;
}

absl::StatusOr<std::vector<std::string>> InterpretUnload(const api::ModprobeSpec& spec) {
  if (!spec.module_name.empty()) {
    std::vector<std::string> order = LoadOrder(spec);
    std::reverse(order.begin(), order.end());
    return order;
  }
  if (!spec.raw_args || spec.raw_args->unload.empty()) {
    return absl::InvalidArgumentError("modprobe: neither moduleName nor rawArgs.unload is set");
  }
  auto p = Parse(spec.raw_args->unload, "modprobe.rawArgs.unload");
  if (!p.ok()) {
    return p.status();
  }
  if (!p->remove) {
    return absl::InvalidArgumentError(
        "modprobe.rawArgs.unload: has no -r; an unload command must remove (modprobe -r ...)");
  }
  if (p->words.empty()) {
    return absl::InvalidArgumentError("modprobe.rawArgs.unload: names no module");
  }
  return p->words;
}

}  // namespace kmodd::reconcile

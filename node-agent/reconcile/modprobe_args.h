#pragma once

// What the Module's modprobe settings ask for, without running modprobe: KMM passes
// `modprobe -v [args.load] -d <dirName> <moduleName> <parameters>`, or
// `modprobe <rawArgs.load>` verbatim, to a shell in the worker pod. kmodd parses the
// arguments it understands and refuses the rest with a clear error, so that nothing an
// image or a spec says is executed.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/module.h"

namespace kmodd::reconcile {

struct LoadCommand {
  std::vector<std::string> modules;  // in load order (modulesLoadingOrder last to first)
  std::string main_module;           // the one that gets `params`
  std::string params;                // "a=1 b=2"
  std::string dir_name;              // where the tree is in the image
};

// The load command of a modprobe spec (moduleName form or rawArgs.load).
[[nodiscard]] absl::StatusOr<LoadCommand> InterpretLoad(const api::ModprobeSpec& spec);

// The modules to remove, in order (modulesLoadingOrder first to last, or rawArgs.unload).
[[nodiscard]] absl::StatusOr<std::vector<std::string>> InterpretUnload(
    const api::ModprobeSpec& spec);

}  // namespace kmodd::reconcile

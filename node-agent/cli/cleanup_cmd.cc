// kmodd-agent cleanup: remove what kmodd keeps on this node, once the agent has stopped.

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/fd.h"
#include "common/flags.h"
#include "node-agent/cli/apply.h"
#include "node-agent/cli/commands.h"
#include "node-agent/kernel/kmod_kernel.h"
#include "node-agent/reconcile/journal.h"
#include "node-agent/server/state_cleanup.h"

namespace kmodd::agent {

namespace {

constexpr char kUsage[] =
    "usage: kmodd-agent cleanup [--state-dir DIR] [--firmware-dir DIR] [--firmware-class-path]\n"
    "                           [--socket PATH] [--unload]\n"
    "  Removes what kmodd keeps on this node (the state directory: journal, desired state,\n"
    "  image cache, staged firmware; the agent socket) after the agent has stopped. First\n"
    "  undoes what the journal records: firmware kmodd staged is deleted, firmware_class.path\n"
    "  restored, in-tree modules kmodd removed in this boot are loaded again (last removed\n"
    "  first; one that fails to load is reported as left, and the rest goes on). Refuses\n"
    "  while the agent runs, and while modules kmodd loaded are still loaded unless --unload\n"
    "  (delete the Modules first: the controller unloads them everywhere). Pass the flags\n"
    "  the agent ran with.\n";

struct CleanupOptions {
  ApplyOptions apply;
  std::string socket = "/run/kmodd/agent.sock";
  bool unload = false;
};

// True when something accepts connections on the unix socket: an agent is running.
bool SocketAnswers(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) {
    return false;
  }
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    return false;
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  return ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
}

// Undoes what the journal records (unload, release firmware, restore firmware_class.path
// and in-tree modules: what applying the empty set does). False, after saying why on
// stderr, when it must not or could not. An in-tree module that cannot be loaded again
// does not stop the cleanup (the state would only keep a record nobody acts on): it is
// added to `left` with why, and the exit status says so.
bool Undo(const CleanupOptions& o, reconcile::Journal journal, std::vector<std::string>& left) {
  kernel::KmodKernel kernel(kernel::KmodKernel::Options{});
  auto observed = kernel.Observe();
  if (!observed.ok()) {
    std::cerr << "error: observing the kernel: " << observed.status().message()
              << "; nothing removed\n";
    return false;
  }
  reconcile::ForgetBoot(journal, observed->boot_id);
  std::vector<std::string> still_loaded;
  for (const auto& [key, entry] : journal.modules) {
    std::vector<std::string> names;
    for (const auto& m : entry.loaded) {
      if (observed->Find(m) != nullptr) {
        names.push_back(m);
      }
    }
    if (!names.empty()) {
      still_loaded.push_back(absl::StrCat("Module ", key, ": ", absl::StrJoin(names, ", ")));
    }
  }
  if (!still_loaded.empty() && !o.unload) {
    std::cerr << "error: kmodd's modules are still loaded; nothing removed:\n";
    for (const auto& line : still_loaded) {
      std::cerr << "  " << line << "\n";
    }
    std::cerr << "  delete those Modules first (the controller unloads them), or pass "
                 "--unload\n";
    return false;
  }
  auto undone = ApplyDesired(o.apply, api::NodeModulesConfig{});
  if (!undone.ok() || !undone->modules_converged) {
    std::cerr << "error: could not undo what the journal records; nothing removed:\n"
              << (undone.ok() ? ToYaml(undone->report) : undone.status().ToString()) << "\n";
    return false;
  }
  for (const auto& line : still_loaded) {
    std::cout << "unloaded " << line << "\n";
  }
  for (const auto& r : journal.in_tree_removed) {
    auto failed = undone->not_reloaded.find(r.module);
    if (failed == undone->not_reloaded.end()) {
      std::cout << "reloaded in-tree " << r.module << " (removed for Module " << r.removed_for
                << ")\n";
    } else {
      left.push_back(absl::StrCat("in-tree module ", r.module, ": not loaded again: ",
                                  failed->second, "; load it with modprobe ", r.module));
    }
  }
  return true;
}

}  // namespace

int CleanupCommand(const std::vector<std::string>& args) {
  CleanupOptions o;
  flags::FlagSet flags("kmodd-agent cleanup", kUsage);
  flags.String("--state-dir", "DIR", "the agent's state directory (default /var/lib/kmodd)",
               &o.apply.state_dir);
  flags.String("--firmware-dir", "DIR", "where firmware was staged (default /var/lib/firmware)",
               &o.apply.firmware_dir);
  flags.Switch("--firmware-class-path", "the agent pointed firmware_class.path at it",
               &o.apply.firmware_class_path);
  flags.String("--socket", "PATH", "the agent's socket (default /run/kmodd/agent.sock)",
               &o.socket);
  flags.Switch("--unload",
               "unload the modules kmodd loaded (last loaded first), then\n"
               "load again the in-tree modules they replaced",
               &o.unload);
  if (std::optional<int> exit = flags.ParseOrExit(args, std::cout, std::cerr)) {
    return *exit;
  }
  if (SocketAnswers(o.socket)) {
    std::cerr << "error: an agent is running (" << o.socket
              << " answers): stop it first (on Kubernetes, uninstall the kmodd-agent "
                 "DaemonSet); nothing removed\n";
    return 1;
  }
  std::vector<std::string> not_reloaded;
  std::error_code ec;
  if (std::filesystem::exists(o.apply.state_dir, ec)) {
    const std::string journal_path = o.apply.state_dir + "/journal.json";
    auto journal = reconcile::LoadJournal(journal_path);
    if (!journal.ok()) {
      std::cerr << "error: " << journal.status().message()
                << "\n  the journal says what kmodd loaded and staged; without it nothing is "
                   "removed (repair it, or remove "
                << o.apply.state_dir << " by hand once no kmodd module is loaded)\n";
      return 1;
    }
    if ((!journal->modules.empty() || !journal->in_tree_removed.empty()) &&
        !Undo(o, *journal, not_reloaded)) {
      return 1;
    }
  }
  const StateCleanup done = RemoveAgentState(o.apply.state_dir, o.socket);
  for (const auto& p : done.removed) {
    std::cout << "removed " << p << "\n";
  }
  bool complete = not_reloaded.empty();
  for (const auto& why : not_reloaded) {
    std::cout << "left " << why << "\n";
  }
  for (const auto& p : done.left) {
    std::cout << "left " << p << "\n";
    complete = complete && p.find(": a mount point, emptied") != std::string::npos;
  }
  if (done.removed.empty() && done.left.empty()) {
    std::cout << "nothing to remove\n";
  }
  return complete ? 0 : 1;
}

}  // namespace kmodd::agent

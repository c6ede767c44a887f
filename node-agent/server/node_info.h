#pragma once

// The node facts the agent reports in its hello (NodeInfo): kernel release, boot id,
// architecture, lockdown, signature enforcement, OS. Parsing is pure and tested; reading
// is one function over a root directory (tests point it at a temp dir).

#include <map>
#include <string>
#include <string_view>

namespace kmodd::agent {

struct NodeFacts {
  std::string name;
  std::map<std::string, std::string> labels;
  std::string kernel_release;
  std::string boot_id;
  std::string architecture;  // GOARCH spelling
  std::string lockdown;      // none, integrity, confidentiality; "" unknown
  bool module_sig_enforce = false;
  std::string agent_version;
  std::string os_image;
};

// "none [integrity] confidentiality" -> "integrity"; "" when nothing is bracketed.
std::string ParseLockdown(std::string_view text);
// /sys/module/module/parameters/sig_enforce: "Y" means unsigned modules are refused.
bool ParseSigEnforce(std::string_view text);
// uname's machine in GOARCH spelling: x86_64 -> amd64, aarch64 -> arm64, ...
std::string GoArch(std::string_view machine);
// PRETTY_NAME from an os-release file, unquoted; "" when absent.
std::string ParseOsRelease(std::string_view text);

struct NodeFactsSources {
  std::string root;            // prefix for every path below ("" = the real system)
  std::string release;         // uname -r ("" = uname(2))
  std::string machine;         // uname -m ("" = uname(2))
};

// Unreadable facts stay empty (unknown), never guessed.
NodeFacts ReadNodeFacts(const std::string& name, std::map<std::string, std::string> labels,
                        const NodeFactsSources& sources = {});

}  // namespace kmodd::agent

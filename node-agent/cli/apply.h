#pragma once

// The one-shot reconcile behind `kmodd-agent apply`, shared with `kmodd-agent cleanup`
// (which applies the empty set): converge this node to a NodeModulesConfig with the kernel,
// firmware stager, image cache and journal under the options' directories.

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/value.h"
#include "api/node_modules_config.h"

namespace kmodd::agent {

struct ApplyOptions {
  std::string file;
  std::string state_dir = "/var/lib/kmodd";
  std::string firmware_dir = "/var/lib/firmware";
  bool firmware_class_path = false;
  std::string format = "yaml";
  std::string cache;  // default <state-dir>/images
  std::string pull_secret_file;
  std::string ca_file;
};

struct ApplyReport {
  Value report;  // node, kernel, bootId, converged, modules, inTreeRemoved (as `apply` prints)
  bool converged = false;
  // Every Module converged (desired ones loaded, others unloaded); only reloads of in-tree
  // modules may have failed.
  bool modules_converged = false;
  std::map<std::string, std::string> not_reloaded;  // in-tree module -> why its reload failed
};

// Reconciles until converged or failed (a few rounds with retries). An error only when
// nothing could be tried (unreadable journal, firmware ledger, pull secret or kernel).
[[nodiscard]] absl::StatusOr<ApplyReport> ApplyDesired(const ApplyOptions& o,
                                                       const api::NodeModulesConfig& desired);

}  // namespace kmodd::agent

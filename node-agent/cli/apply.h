#pragma once

// The one-shot reconcile behind `kmodd-agent apply`, shared with `kmodd-agent cleanup`
// (which applies the empty set): converge this node to a NodeModulesConfig with the kernel,
// firmware stager, image cache and journal under the options' directories.

#include <string>

#include "absl/status/statusor.h"
#include "common/value.h"
#include "controller/api/node_modules_config.h"

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
  Value report;      // node, kernel, bootId, converged, modules (as `apply -o yaml` prints)
  bool converged = false;
};

// Reconciles until converged or failed (a few rounds with retries). An error only when
// nothing could be tried (unreadable journal, firmware ledger, pull secret or kernel).
[[nodiscard]] absl::StatusOr<ApplyReport> ApplyDesired(const ApplyOptions& o,
                                                       const api::NodeModulesConfig& desired);

}  // namespace kmodd::agent

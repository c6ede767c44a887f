#pragma once

// Turns one NodeModulesConfig entry into what the reconciler needs: the driver tree, the
// insert order, the in-tree modules to remove, the firmware directory, and a fingerprint
// of the configuration. Reads the image's files (I/O) but changes nothing.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "api/node_modules_config.h"
#include "node-agent/kernel/kernel.h"
#include "node-agent/kernel/tree.h"
#include "node-agent/reconcile/stores.h"

namespace kmodd::reconcile {

struct DesiredModule {
  std::string key;          // namespace/name
  std::string source;       // containerImage as given
  std::string fingerprint;  // changes iff what should be loaded changes
  std::string tree;         // driver tree directory
  std::vector<kernel::LoadStep> steps;      // insert order
  std::vector<std::string> unload_order;    // the Module's own modules, removal order
  std::vector<std::string> in_tree_remove;  // in-tree modules to remove first
  std::string firmware_source;              // absolute directory, empty when none
  absl::Status problem;  // preparation failed: reported, nothing is done for this Module
};

// `kernel_release` is the running kernel's; the entry must be for it.
DesiredModule Prepare(const api::NodeModuleSpec& spec, const std::string& kernel_release,
                      ImageStore& images, kernel::Kernel& kernel);

}  // namespace kmodd::reconcile

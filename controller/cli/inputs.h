#pragma once

// Reading Module and Node documents from the paths given on the command line.

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "api/decode.h"
#include "common/clock.h"
#include "controller/kube/rest_client.h"

namespace kmodd::cli {

// Decodes every file named, and every *.yaml, *.yml and *.json file directly inside each
// directory named (sorted, so that diagnostics come in a stable order). An unreadable path
// is an error diagnostic.
api::Decoded DecodePaths(const std::vector<std::string>& paths);

// "a, b, c": the paths as given, for messages.
std::string JoinPaths(const std::vector<std::string>& paths);

// Validates every decoded Module, adds their errors to `d.errors` (located at the Module's
// file), drops invalid Modules, and reports a Module defined twice. The fields only
// Kubernetes acts on (api::KubernetesOnlyFields) are warnings: these commands read Modules
// without it.
void ValidateDecoded(api::Decoded& d);

// --kubernetes: the API client from --kubeconfig FILE, or the in-cluster configuration when
// it is "". `clock` must outlive the client.
[[nodiscard]] absl::StatusOr<std::unique_ptr<kube::RestKubeClient>> KubeClientFor(const std::string& kubeconfig,
                                                                                const Clock& clock);

// Prints warnings then errors, one per line.
void PrintDiagnostics(const api::Decoded& d, std::ostream& err);

}  // namespace kmodd::cli

#pragma once

// kmodd-loadgen's command line, parsed once into an immutable struct.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kmodd::loadgen {

struct Options {
  std::string controller;  // HOST:PORT
  int agents = 0;
  bool insecure = false;
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  std::string token_file;  // with --ca and no --cert/--key: a Kubernetes bearer token
  std::string token_dir;   // the same, one per agent: the file named as its node
  // With --ca: each agent presents its own certificate, cert_dir/node-<name>.pem and .key
  // (as tools/pki/make-dev-certs names them), on its own connection.
  std::string cert_dir;
  std::string name_prefix = "sim-";
  std::map<std::string, std::string> labels;
  std::string kernel = "6.1.0-57-cloud-amd64";
  int connections = 0;  // 0 until parsed: then ceil(agents / 100)
  int until_version_count = 0;
  int wait_all_acked_s = 0;
  std::string since_file;
  std::string report_file;
  // A stream that ends is reopened on the same channel after the agent's backoff (new
  // stream, new hello), as kmodd-agent's SyncClient does.
  bool reconnect = false;
  // 0: the agent's channel arguments (SyncChannelArguments). Otherwise gRPC's
  // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, the least time a connection attempt is given: 100
  // reproduces the agent before issue 12 item C.
  int min_connect_timeout_ms = 0;
  // Rollout tests (issue 15): a module whose image contains fail_image is reported FAILED,
  // on the fail_nodes only when that list is not empty; a changed module is reported
  // LOADING for load_ms first; every phase change goes to timeline_file (JSON lines).
  std::string fail_image;
  std::set<std::string> fail_nodes;
  int load_ms = 0;
  std::string timeline_file;
  // Not empty when --help was asked: the text to print (nothing else was checked).
  std::string help;
};

extern const char kUsage[];

// Errors are usage errors (exit 2), with the flag named.
[[nodiscard]] absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args);

}  // namespace kmodd::loadgen

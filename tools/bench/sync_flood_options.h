#pragma once

// kmodd-sync-flood's command line (tools/bench/sync_flood.cc), parsed once into an
// immutable struct.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kmodd::bench {

struct SyncFloodOptions {
  std::string controller;  // HOST:PORT
  std::string ca_file;     // TLS, trusting this CA; no client certificate
  int duration_s = 20;
  int connections = 8;
  int inflight = 2000;  // streams open at once, at most
  // One fixed token for every stream, or (distinct_tokens) a fresh random one per stream.
  std::string token = "kmodd-sync-flood-not-a-token";
  bool distinct_tokens = false;
  std::string node_prefix = "flood-";
  int nodes = 1000;  // hellos name <node_prefix>0 .. <node_prefix><nodes - 1>, in turn
  // Not empty when --help was asked: the text to print (nothing else was checked).
  std::string help;
};

extern const char kSyncFloodUsage[];

// Errors are usage errors (exit 2), with the flag named.
[[nodiscard]] absl::StatusOr<SyncFloodOptions> ParseSyncFloodOptions(
    const std::vector<std::string>& args);

}  // namespace kmodd::bench

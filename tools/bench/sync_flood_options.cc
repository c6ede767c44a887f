#include "tools/bench/sync_flood_options.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kmodd::bench {

const char kSyncFloodUsage[] =
    "usage: kmodd-sync-flood --controller HOST:PORT --ca FILE\n"
    "                        [--duration SECONDS] [--connections C] [--inflight K]\n"
    "                        [--token TOKEN | --distinct-tokens] [--node-prefix flood-]\n"
    "                        [--nodes N]\n"
    "\n"
    "For SECONDS (default 20), opens Sync streams as fast as it can over C TCP connections\n"
    "(default 8), at most K open at once (default 2000). Each sends a hello naming node\n"
    "<prefix><i mod N> with authorization: Bearer TOKEN (default: one fixed garbage token;\n"
    "--distinct-tokens: a fresh random one per stream), over TLS trusting --ca, with no\n"
    "client certificate. Prints one JSON line: streams opened and finished, per second, and\n"
    "how they ended, by status code.\n";

namespace {

absl::StatusOr<int> Positive(const std::string& flag, const std::string& v) {
  int n = 0;
  if (!absl::SimpleAtoi(v, &n) || n <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " must be a positive integer, not \"", v, "\""));
  }
  return n;
}

}  // namespace

absl::StatusOr<SyncFloodOptions> ParseSyncFloodOptions(const std::vector<std::string>& args) {
  SyncFloodOptions o;
  bool token_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--distinct-tokens") {
      o.distinct_tokens = true;
      continue;
    }
    if (i + 1 >= args.size()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag or missing value: ", a));
    }
    const std::string& v = args[++i];
    auto number = [&](int& into) -> absl::Status {
      absl::StatusOr<int> n = Positive(a, v);
      if (!n.ok()) {
        return n.status();
      }
      into = *n;
      return absl::OkStatus();
    };
    absl::Status s;
    if (a == "--controller") {
      o.controller = v;
    } else if (a == "--ca") {
      o.ca_file = v;
    } else if (a == "--duration") {
      s = number(o.duration_s);
    } else if (a == "--connections") {
      s = number(o.connections);
    } else if (a == "--inflight") {
      s = number(o.inflight);
    } else if (a == "--token") {
      if (v.empty()) {
        return absl::InvalidArgumentError("--token must not be empty");
      }
      o.token = v;
      token_given = true;
    } else if (a == "--node-prefix") {
      o.node_prefix = v;
    } else if (a == "--nodes") {
      s = number(o.nodes);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", a));
    }
    if (!s.ok()) {
      return s;
    }
  }
  if (o.controller.empty()) {
    return absl::InvalidArgumentError("--controller is required");
  }
  if (o.ca_file.empty()) {
    return absl::InvalidArgumentError("--ca is required (the flood speaks TLS, as agents do)");
  }
  if (token_given && o.distinct_tokens) {
    return absl::InvalidArgumentError("--token and --distinct-tokens exclude each other");
  }
  return o;
}

}  // namespace kmodd::bench

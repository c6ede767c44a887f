#include "tools/bench/sync_flood_options.h"

#include "common/flags.h"

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

absl::StatusOr<SyncFloodOptions> ParseSyncFloodOptions(const std::vector<std::string>& args) {
  SyncFloodOptions o;
  bool token_given = false;
  flags::FlagSet flags("kmodd-sync-flood", kSyncFloodUsage);
  const flags::IntRange positive{1};
  flags.String("--controller", "HOST:PORT", "the controller's Sync port", &o.controller);
  flags.String("--ca", "FILE", "the CA the controller's certificate chains to", &o.ca_file);
  flags.Int("--duration", "SECONDS", "how long to flood (default 20)", &o.duration_s, positive);
  flags.Int("--connections", "C", "TCP connections (default 8)", &o.connections, positive);
  flags.Int("--inflight", "K", "streams open at once, at most (default 2000)", &o.inflight,
            positive);
  flags.Custom("--token", "TOKEN", "the bearer token of every stream",
               [&o, &token_given](const std::string& v) {
                 o.token = v;
                 token_given = true;
                 return absl::OkStatus();
               });
  flags.Switch("--distinct-tokens", "a fresh random token per stream", &o.distinct_tokens);
  flags.String("--node-prefix", "PREFIX", "hellos name PREFIX<i mod N> (default flood-)",
               &o.node_prefix);
  flags.Int("--nodes", "N", "distinct node names (default 1000)", &o.nodes, positive);
  absl::StatusOr<flags::FlagSet::Outcome> outcome = flags.Parse(args);
  if (!outcome.ok()) {
    return outcome.status();
  }
  if (*outcome == flags::FlagSet::Outcome::kHelp) {
    o.help = flags.Help();
    return o;
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

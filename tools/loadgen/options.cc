#include "tools/loadgen/options.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/flags.h"

namespace kmodd::loadgen {

const char kUsage[] =
    "usage: kmodd-loadgen --controller HOST:PORT --agents N\n"
    "                     (--insecure |\n"
    "                      --ca FILE (--cert FILE --key FILE | --cert-dir D | --token-file F |\n"
    "                                 --token-dir D))\n"
    "                     [--name-prefix sim-] [--label KEY=VALUE]... [--kernel RELEASE]\n"
    "                     [--connections C] [--until-version-count K]\n"
    "                     [--wait-all-acked SECONDS --since-file FILE] [--report FILE]\n"
    "                     [--reconnect [--since-file FILE]] [--min-connect-timeout-ms MS]\n"
    "\n"
    "N simulated agents on the real Sync protocol: each sends a hello, ACKs every desired\n"
    "state at once and reports its modules LOADED. Prints \"connected N\" when every hello\n"
    "is answered. --wait-all-acked: then waits until every agent has ACKed a desired state\n"
    "whose modules differ from its previous one and prints a JSON summary of the times\n"
    "since the unix-ms timestamp in --since-file. --until-version-count: exits once every\n"
    "agent has received K desired states. Otherwise runs until interrupted.\n"
    "--connections spreads the streams over C channels (default N/100, rounded up).\n"
    "--token-file: every stream shows this token (authorization: Bearer), as an agent\n"
    "with a projected service-account token does. --token-dir: each agent shows the token in\n"
    "D/<its node name> (a controller in Kubernetes mode serves a token only as its node).\n"
    "--cert-dir: each agent presents D/node-<its node name>.pem and .key, on its own\n"
    "connection. --reconnect: a stream that ends is reopened after the agent's backoff;\n"
    "each time every agent is connected again, prints a JSON line (times since the unix-ms\n"
    "timestamp in --since-file, failed attempts). --min-connect-timeout-ms: gRPC's\n"
    "GRPC_ARG_MIN_RECONNECT_BACKOFF_MS (the least time one connection attempt is given);\n"
    "default: the agent's channel arguments.\n";

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  Options o;
  flags::FlagSet flags("kmodd-loadgen", kUsage);
  const flags::IntRange positive{1};
  flags.String("--controller", "HOST:PORT", "the controller's Sync port", &o.controller)
      .Required();
  flags.Int("--agents", "N", "simulated agents", &o.agents, positive).Required();
  flags.Switch("--insecure", "plain text", &o.insecure);
  flags.String("--ca", "FILE", "the controller's CA", &o.ca_file);
  flags.String("--cert", "FILE", "one client certificate for every agent", &o.cert_file);
  flags.String("--key", "FILE", "its key", &o.key_file);
  flags.String("--cert-dir", "D", "D/node-<node>.pem and .key, one per agent", &o.cert_dir);
  flags.String("--token-file", "F", "one bearer token for every stream", &o.token_file);
  flags.String("--token-dir", "D", "D/<node>: one bearer token per agent", &o.token_dir);
  flags.String("--name-prefix", "PREFIX", "node names PREFIX0.. (default sim-)", &o.name_prefix);
  flags.KeyValues("--label", "KEY=VALUE", "a node label of every agent (repeatable)", &o.labels);
  flags.String("--kernel", "RELEASE", "the kernel every agent reports", &o.kernel);
  flags.Int("--connections", "C", "channels the streams share (default N/100, rounded up)",
            &o.connections, positive);
  flags.Int("--until-version-count", "K", "exit once every agent has received K desired states",
            &o.until_version_count, positive);
  flags.Int("--wait-all-acked", "SECONDS", "wait for every agent to ACK a changed state",
            &o.wait_all_acked_s, positive);
  flags.String("--since-file", "FILE", "the unix-ms start mark", &o.since_file);
  flags.String("--report", "FILE", "where the summary goes too", &o.report_file);
  flags.Switch("--reconnect", "reopen a stream that ends, after the agent's backoff",
               &o.reconnect);
  flags.Int("--min-connect-timeout-ms", "MS", "GRPC_ARG_MIN_RECONNECT_BACKOFF_MS",
            &o.min_connect_timeout_ms, positive);
  flags.String("--fail-image", "SUBSTRING",
               "report FAILED for a module whose image contains SUBSTRING", &o.fail_image);
  std::string fail_nodes;
  flags.String("--fail-nodes", "N1,N2,..", "with --fail-image: only on these nodes", &fail_nodes);
  flags.Int("--load-ms", "MS", "report a changed module LOADING for MS before LOADED or FAILED",
            &o.load_ms);
  flags.String("--timeline", "FILE",
               "on exit, one JSON line per module phase change each agent reported",
               &o.timeline_file);
  absl::StatusOr<flags::FlagSet::Outcome> outcome = flags.Parse(args);
  if (!outcome.ok()) {
    return outcome.status();
  }
  if (*outcome == flags::FlagSet::Outcome::kHelp) {
    o.help = flags.Help();
    return o;
  }
  for (absl::string_view n : absl::StrSplit(fail_nodes, ',', absl::SkipEmpty())) {
    o.fail_nodes.emplace(n);
  }
  if (!o.fail_nodes.empty() && o.fail_image.empty()) {
    return absl::InvalidArgumentError("--fail-nodes goes with --fail-image");
  }
  if (o.load_ms < 0) {
    return absl::InvalidArgumentError("--load-ms must not be negative");
  }
  const bool tls = !o.ca_file.empty() || !o.cert_file.empty() || !o.key_file.empty() ||
                   !o.cert_dir.empty() || !o.token_file.empty() || !o.token_dir.empty();
  if (o.insecure == tls) {
    return absl::InvalidArgumentError(
        "give either --insecure or --ca with --cert and --key, --cert-dir, --token-file or "
        "--token-dir");
  }
  const int credentials = (!o.cert_file.empty() || !o.key_file.empty() ? 1 : 0) +
                          (o.cert_dir.empty() ? 0 : 1) + (o.token_file.empty() ? 0 : 1) +
                          (o.token_dir.empty() ? 0 : 1);
  const bool pair = o.cert_file.empty() == o.key_file.empty();
  if (tls && (o.ca_file.empty() || credentials != 1 || !pair)) {
    return absl::InvalidArgumentError(
        "--ca goes with one of: --cert and --key, --cert-dir, --token-file, --token-dir");
  }
  if (!o.cert_dir.empty()) {
    // A channel has one set of credentials, so an agent with its own certificate has its
    // own channel (and connection).
    if (o.connections != 0 && o.connections != o.agents) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--cert-dir gives every agent its own connection: --connections must be --agents (",
          o.agents, ") or left out, not ", o.connections));
    }
    o.connections = o.agents;
  }
  if (o.reconnect && (o.wait_all_acked_s > 0 || o.until_version_count > 0)) {
    return absl::InvalidArgumentError(
        "--reconnect runs until interrupted: leave out --wait-all-acked and "
        "--until-version-count");
  }
  if (o.wait_all_acked_s > 0 && o.since_file.empty()) {
    return absl::InvalidArgumentError("--wait-all-acked needs --since-file");
  }
  if (o.connections == 0) {
    o.connections = (o.agents + 99) / 100;
  }
  if (o.connections > o.agents) {
    o.connections = o.agents;
  }
  return o;
}

}  // namespace kmodd::loadgen

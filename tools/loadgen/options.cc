#include "tools/loadgen/options.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

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

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--insecure") {
      o.insecure = true;
      continue;
    }
    if (a == "--reconnect") {
      o.reconnect = true;
      continue;
    }
    if (i + 1 >= args.size()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag or missing value: ", a));
    }
    const std::string& v = args[++i];
    auto number = [&](int& into) -> absl::Status {
      auto n = Positive(a, v);
      if (!n.ok()) {
        return n.status();
      }
      into = *n;
      return absl::OkStatus();
    };
    absl::Status s;
    if (a == "--controller") {
      o.controller = v;
    } else if (a == "--agents") {
      s = number(o.agents);
    } else if (a == "--ca") {
      o.ca_file = v;
    } else if (a == "--cert") {
      o.cert_file = v;
    } else if (a == "--key") {
      o.key_file = v;
    } else if (a == "--token-file") {
      o.token_file = v;
    } else if (a == "--token-dir") {
      o.token_dir = v;
    } else if (a == "--cert-dir") {
      o.cert_dir = v;
    } else if (a == "--min-connect-timeout-ms") {
      s = number(o.min_connect_timeout_ms);
    } else if (a == "--name-prefix") {
      o.name_prefix = v;
    } else if (a == "--label") {
      const size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0) {
        return absl::InvalidArgumentError(absl::StrCat("--label wants KEY=VALUE, not \"", v, "\""));
      }
      o.labels[v.substr(0, eq)] = v.substr(eq + 1);
    } else if (a == "--kernel") {
      o.kernel = v;
    } else if (a == "--connections") {
      s = number(o.connections);
    } else if (a == "--until-version-count") {
      s = number(o.until_version_count);
    } else if (a == "--wait-all-acked") {
      s = number(o.wait_all_acked_s);
    } else if (a == "--since-file") {
      o.since_file = v;
    } else if (a == "--report") {
      o.report_file = v;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", a));
    }
    if (!s.ok()) {
      return s;
    }
  }
  if (o.controller.empty() || o.agents == 0) {
    return absl::InvalidArgumentError("--controller and --agents are required");
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

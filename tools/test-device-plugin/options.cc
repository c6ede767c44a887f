#include "tools/test-device-plugin/options.h"

#include <cctype>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/flags.h"

namespace kmodd::test_device_plugin {
namespace {

constexpr size_t kMaxNameLength = 63;
constexpr size_t kMaxPathLength = 4096;
constexpr int kMinPollMs = 10;
constexpr int kMaxPollMs = 60000;

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// The flag and the value are put in front of the message by the FlagSet.
absl::Status CheckPath(absl::string_view value) {
  if (value.empty() || value.size() > kMaxPathLength || value.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("want an absolute path of at most ", kMaxPathLength, " bytes"));
  }
  for (char c : value) {
    if (std::iscntrl(static_cast<unsigned char>(c)) != 0) {
      return absl::InvalidArgumentError("the path holds a control character");
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool IsValidResourceName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength || !IsAlnum(name.front()) ||
      !IsAlnum(name.back())) {
    return false;
  }
  for (char c : name) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

std::string Usage() {
  return absl::StrCat(
      "usage: kmodd-test-device-plugin --resource NAME [--count N] [--health-file PATH]\n"
      "                                [--plugin-dir DIR] [--poll-interval-ms N]\n"
      "                                [--health-address 127.0.0.1:PORT]\n"
      "Advertises N devices of ", kResourceDomain, "/NAME to the kubelet (deviceplugin/v1beta1).\n");
}

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  Options o;
  int poll_ms = static_cast<int>(o.poll_interval.count());
  flags::FlagSet flags("kmodd-test-device-plugin", Usage());
  flags.Custom("--resource", "NAME", "1-63 of [A-Za-z0-9._-], alphanumeric at both ends",
               [&o](const std::string& value) {
                 // A full name is accepted when it is in our domain: the DaemonSet reads the
                 // same either way.
                 absl::string_view name = value;
                 const std::string prefix = absl::StrCat(kResourceDomain, "/");
                 if (name.substr(0, prefix.size()) == prefix) {
                   name.remove_prefix(prefix.size());
                 }
                 if (!IsValidResourceName(name)) {
                   return absl::InvalidArgumentError(absl::StrCat(
                       "want NAME (or ", prefix,
                       "NAME) with 1-63 of [A-Za-z0-9._-], alphanumeric at both ends"));
                 }
                 o.name = std::string(name);
                 o.resource = absl::StrCat(prefix, name);
                 return absl::OkStatus();
               })
      .Required();
  flags.Int("--count", "N",
            absl::StrCat("devices NAME-0 .. NAME-(N-1), 1 to ", kMaxDevices, " (default 1)"),
            &o.count, {1, kMaxDevices});
  flags.Custom("--health-file", "PATH",
               "absent: every device Unhealthy; present: lines\n"
               "\"<device-id>|* Healthy|Unhealthy\", unnamed devices Healthy",
               [&o](const std::string& value) {
                 absl::Status s = CheckPath(value);
                 if (s.ok()) {
                   o.health_file = value;
                 }
                 return s;
               });
  flags.Custom("--plugin-dir", "DIR",
               absl::StrCat("the kubelet's device-plugin directory (default ",
                            kKubeletDevicePluginDir, ")"),
               [&o](const std::string& value) {
                 absl::Status s = CheckPath(value);
                 if (s.ok()) {
                   o.plugin_dir = value;
                   while (o.plugin_dir.size() > 1 && o.plugin_dir.back() == '/') {
                     o.plugin_dir.pop_back();
                   }
                 }
                 return s;
               });
  flags.Int("--poll-interval-ms", "N",
            absl::StrCat("how often the health file and the sockets are looked at\n(",
                         kMinPollMs, " to ", kMaxPollMs, ", default 1000)"),
            &poll_ms, {kMinPollMs, kMaxPollMs});
  flags.Custom("--health-address", "127.0.0.1:PORT",
               "serve gRPC health (\"\" and \"liveness\" SERVING) on loopback,\n"
               "for a gRPC liveness probe of a host-network Pod",
               [&o](const std::string& value) {
                 int port = 0;
                 const std::string prefix = "127.0.0.1:";
                 if (value.rfind(prefix, 0) != 0 ||
                     !absl::SimpleAtoi(value.substr(prefix.size()), &port) || port < 1 ||
                     port > 65535) {
                   return absl::InvalidArgumentError(
                       "want 127.0.0.1:PORT (loopback only), PORT 1 to 65535");
                 }
                 o.health_address = value;
                 return absl::OkStatus();
               });
  absl::StatusOr<flags::FlagSet::Outcome> outcome = flags.Parse(args);
  if (!outcome.ok()) {
    return outcome.status();
  }
  if (*outcome == flags::FlagSet::Outcome::kHelp) {
    return absl::CancelledError(flags.Help());
  }
  o.poll_interval = std::chrono::milliseconds(poll_ms);
  return o;
}

}  // namespace kmodd::test_device_plugin

#include "tools/test-device-plugin/options.h"

#include <cctype>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kmodd::test_device_plugin {
namespace {

constexpr size_t kMaxNameLength = 63;
constexpr size_t kMaxPathLength = 4096;
constexpr int kMinPollMs = 10;
constexpr int kMaxPollMs = 60000;

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

absl::StatusOr<int> ParseInt(absl::string_view flag, absl::string_view value, int min, int max) {
  int n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < min || n > max) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " \"", value,
                                                   "\": want a whole number from ", min, " to ",
                                                   max));
  }
  return n;
}

absl::Status CheckPath(absl::string_view flag, absl::string_view value) {
  if (value.empty() || value.size() > kMaxPathLength || value.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": want an absolute path of at most ", kMaxPathLength, " bytes"));
  }
  for (char c : value) {
    if (std::iscntrl(static_cast<unsigned char>(c)) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": the path holds a control character"));
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
      "Advertises N devices of ", kResourceDomain, "/NAME to the kubelet (deviceplugin/v1beta1).\n"
      "  --resource NAME         1-63 of [A-Za-z0-9._-], alphanumeric at both ends\n"
      "  --count N               devices NAME-0 .. NAME-(N-1), 1 to ", kMaxDevices,
      " (default 1)\n"
      "  --health-file PATH      absent: every device Unhealthy; present: lines\n"
      "                          \"<device-id>|* Healthy|Unhealthy\", unnamed devices Healthy\n"
      "  --plugin-dir DIR        the kubelet's device-plugin directory (default ",
      kKubeletDevicePluginDir, ")\n"
      "  --poll-interval-ms N    how often the health file and the sockets are looked at\n"
      "                          (", kMinPollMs, " to ", kMaxPollMs, ", default 1000)\n");
}

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  Options o;
  bool have_resource = false;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (arg.substr(0, 2) != "--") {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument \"", arg,
                                                     "\": every option is a --flag"));
    }
    absl::string_view flag = arg.substr(2);
    std::optional<absl::string_view> value;
    if (auto eq = flag.find('='); eq != absl::string_view::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (flag != "help") {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("--", flag, " needs a value"));
      }
      value = args[++i];
    }
    if (flag == "help") {
      return absl::CancelledError(Usage());
    }
    if (flag == "resource") {
      // A full name is accepted when it is in our domain: the DaemonSet reads the same
      // either way.
      absl::string_view name = *value;
      std::string prefix = absl::StrCat(kResourceDomain, "/");
      if (name.substr(0, prefix.size()) == prefix) {
        name.remove_prefix(prefix.size());
      }
      if (!IsValidResourceName(name)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--resource \"", *value, "\": want NAME (or ", prefix,
            "NAME) with 1-63 of [A-Za-z0-9._-], alphanumeric at both ends"));
      }
      o.name = std::string(name);
      o.resource = absl::StrCat(prefix, name);
      have_resource = true;
    } else if (flag == "count") {
      absl::StatusOr<int> n = ParseInt(flag, *value, 1, kMaxDevices);
      if (!n.ok()) {
        return n.status();
      }
      o.count = *n;
    } else if (flag == "health-file") {
      if (absl::Status s = CheckPath(flag, *value); !s.ok()) {
        return s;
      }
      o.health_file = std::string(*value);
    } else if (flag == "plugin-dir") {
      if (absl::Status s = CheckPath(flag, *value); !s.ok()) {
        return s;
      }
      o.plugin_dir = std::string(*value);
      while (o.plugin_dir.size() > 1 && o.plugin_dir.back() == '/') {
        o.plugin_dir.pop_back();
      }
    } else if (flag == "poll-interval-ms") {
      absl::StatusOr<int> n = ParseInt(flag, *value, kMinPollMs, kMaxPollMs);
      if (!n.ok()) {
        return n.status();
      }
      o.poll_interval = std::chrono::milliseconds(*n);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown option --", flag, "\n", Usage()));
    }
  }
  if (!have_resource) {
    return absl::InvalidArgumentError(absl::StrCat("--resource is required\n", Usage()));
  }
  return o;
}

}  // namespace kmodd::test_device_plugin

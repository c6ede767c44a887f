#pragma once

// Command-line options of kmodd-test-device-plugin, parsed once into an immutable struct.

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kmodd::test_device_plugin {

// Every resource this plugin advertises is in this domain: it is a test tool, and a name of
// its own keeps it from ever standing in for a real vendor's resource on a node.
inline constexpr absl::string_view kResourceDomain = "kmodd.test";
inline constexpr absl::string_view kKubeletDevicePluginDir = "/var/lib/kubelet/device-plugins";
inline constexpr int kMaxDevices = 256;

struct Options {
  std::string name;           // the part after "kmodd.test/"
  std::string resource;       // "kmodd.test/<name>"
  int count = 1;              // devices <name>-0 .. <name>-<count-1>
  std::string health_file;    // empty: every device always Healthy
  std::string plugin_dir{kKubeletDevicePluginDir};
  std::chrono::milliseconds poll_interval{1000};
  // "127.0.0.1:PORT": serve grpc.health.v1.Health there, services "" and "liveness"
  // SERVING (what KMM's DRA DaemonSet probes); empty: none.
  std::string health_address;
};

// args excludes argv[0]. Flags: --resource NAME (required), --count N, --health-file PATH,
// --plugin-dir DIR, --poll-interval-ms N, --health-address 127.0.0.1:PORT; each as "--flag value" or "--flag=value".
// InvalidArgument names the flag and what to write instead; Cancelled carries the --help
// text.
[[nodiscard]] absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args);

// The synopsis and what the plugin does (--help adds the flags).
std::string Usage();

// The rule of a Kubernetes qualified name's name part (what an extended resource name may
// hold after its domain): 1-63 of [A-Za-z0-9._-], alphanumeric at both ends.
bool IsValidResourceName(absl::string_view name);

}  // namespace kmodd::test_device_plugin

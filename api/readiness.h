#pragma once

// Readiness checks (issue 15, item 1): what must hold on a node, after a Module's kernel
// modules are loaded, before the node counts as Ready for it. They are given in the
// Module's ModulePolicy (spec.readiness.checks), sent to each node's agent with the Module's
// entry, and run by the agent itself. The agent only reads what the kernel exposes (sysfs,
// procfs, udev's device list, the kernel log): nothing in a driver image is ever run.
//
//   readiness:
//     checks:
//     - name: version                          # names the check in messages and Events
//       path: {path: /sys/module/gpu/version, equals: "2.1.0"}   # or contains:, or neither
//       timeoutSeconds: 30                     # default 60
//     - name: render-node
//       devices: {glob: "/dev/dri/renderD*", count: 1}   # at least count, seen through udev
//     - name: probe
//       kernelLog: {pattern: "gpu.*probe.*failed", seconds: 10}   # no such line since the load
//     - name: refcount
//       stable: {path: /sys/module/gpu/refcnt, seconds: 30}   # unchanged for 30 s
//
// A node's state for the Module: Loading, then Available (loaded, checks running), then
// Ready (every check passed; reported as Loaded) or Failed (the first check that failed,
// with what the agent saw).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/diagnostic.h"

namespace kmodd::api {

struct ReadinessCheck {
  enum class Kind { kPath, kDevices, kKernelLog, kStable };

  std::string name;
  Kind kind = Kind::kPath;
  std::string path;                     // kPath, kStable
  std::optional<std::string> equals;    // kPath: the content, trailing newlines ignored
  std::optional<std::string> contains;  // kPath: a substring of the content
  std::string glob;                     // kDevices: fnmatch pattern of device nodes
  int64_t count = 1;                    // kDevices: at least this many
  std::string pattern;                  // kKernelLog: RE2, searched in each line
  // kKernelLog: the window after the load in which a matching line fails the check;
  // kStable: how long the value must stay unchanged.
  int64_t seconds = 0;
  int64_t timeout_seconds = 60;         // kPath, kDevices, kStable: pass within this

  bool operator==(const ReadinessCheck&) const = default;
};

inline constexpr int64_t kDefaultCheckTimeoutSeconds = 60;
inline constexpr int64_t kDefaultKernelLogSeconds = 10;
inline constexpr size_t kMaxReadinessChecks = 16;

const char* CheckKindName(ReadinessCheck::Kind k);  // path, devices, kernelLog, stable

// What the check looks at, for messages: "/sys/module/gpu/version", "/dev/dri/renderD*",
// "kernel log /probe.*failed/".
std::string CheckSubject(const ReadinessCheck& c);

// Why a check may not read `path`, or "". Checks read only what the kernel exposes about
// drivers and devices: not a process's files (its environment, its root, its memory), nor
// files whose read has an effect (/proc/kmsg consumes the log) or is huge. The agent applies
// it again to where the path resolves.
std::string CheckPathProblem(const std::string& path);

// The rules for a list of checks (the webhook's, the decoder's and the agent's): names
// unique DNS labels; paths absolute, normalised, under /sys or /proc but not a process's
// directory, /proc/kmsg or /proc/kcore; globs under /dev; patterns valid RE2; bounds on
// every number and length. `field` is the list's path ("spec.readiness.checks").
std::vector<FieldError> ValidateReadinessChecks(const std::vector<ReadinessCheck>& checks,
                                                const std::string& field);

}  // namespace kmodd::api

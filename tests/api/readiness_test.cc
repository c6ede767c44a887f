// Readiness checks in a ModulePolicy (api/readiness.h): a full list read, and a table of
// hostile and mistaken checks, each rejected naming the field (the webhook, the decoder and
// the agent apply the same rules).

#include <catch2/catch.hpp>

#include <string>

#include "api/decode.h"
#include "tests/api/policy_rejected.h"
#include "api/readiness.h"

using kmodd::api::Decoded;
using kmodd::api::DecodeDocuments;
using kmodd::api::ReadinessCheck;

namespace {

std::string Checks(const std::string& list) {
  return "apiVersion: kmodd.io/v1alpha1\nkind: ModulePolicy\nmetadata: {name: p, namespace: ns}\n"
         "spec:\n  moduleName: m\n  readiness:\n    checks:\n" + list;
}

}  // namespace

TEST_CASE("readiness checks: every kind read, defaults filled in") {
  const Decoded d = DecodeDocuments(Checks(R"(    - name: version
      path: {path: /sys/module/gpu/version, equals: "2.1.0"}
      timeoutSeconds: 30
    - name: params
      path: {path: /sys/module/gpu/parameters, contains: ""}
    - name: render
      devices: {glob: "/dev/dri/renderD*", count: 2}
    - name: probe
      kernelLog: {pattern: "gpu.*probe.*failed"}
    - name: refcount
      stable: {path: /sys/module/gpu/refcnt, seconds: 30}
      timeoutSeconds: 120
)"), "p.yaml");
  REQUIRE(d.errors.empty());
  CHECK(d.warnings.empty());
  REQUIRE(d.policies.size() == 1);
  const auto& c = d.policies[0].object.readiness;
  REQUIRE(c.size() == 5);
  CHECK(c[0].kind == ReadinessCheck::Kind::kPath);
  CHECK(c[0].path == "/sys/module/gpu/version");
  CHECK(c[0].equals == "2.1.0");
  CHECK_FALSE(c[0].contains.has_value());
  CHECK(c[0].timeout_seconds == 30);
  CHECK(c[1].contains == "");  // given empty: present, not absent
  CHECK(c[1].timeout_seconds == kmodd::api::kDefaultCheckTimeoutSeconds);
  CHECK(c[2].kind == ReadinessCheck::Kind::kDevices);
  CHECK(c[2].glob == "/dev/dri/renderD*");
  CHECK(c[2].count == 2);
  CHECK(c[3].kind == ReadinessCheck::Kind::kKernelLog);
  CHECK(c[3].seconds == kmodd::api::kDefaultKernelLogSeconds);
  CHECK(c[4].kind == ReadinessCheck::Kind::kStable);
  CHECK(c[4].seconds == 30);
  CHECK(kmodd::api::CheckSubject(c[3]) == "kernel log /gpu.*probe.*failed/");
}

TEST_CASE("readiness checks: hostile and mistaken ones are rejected - naming the field") {
  struct Case {
    const char* what;
    std::string list;
    const char* path;
    const char* message;
  };
  const Case cases[] = {
      {"no name", "    - path: {path: /sys/module/m}\n", "spec.readiness.checks[0].name", "required"},
      {"name not a label", "    - name: A_B\n      path: {path: /sys/module/m}\n",
       "spec.readiness.checks[0].name", "RFC 1123"},
      {"duplicate name",
       "    - name: a\n      path: {path: /sys/module/m}\n    - name: a\n      path: {path: /sys/module/n}\n",
       "spec.readiness.checks[1].name", "earlier check"},
      {"no kind", "    - name: a\n", "spec.readiness.checks[0]", "exactly one of"},
      {"two kinds", "    - name: a\n      path: {path: /sys/module/m}\n      devices: {glob: /dev/x}\n",
       "spec.readiness.checks[0]", "exactly one of"},
      {"relative path", "    - name: a\n      path: {path: sys/module/m}\n",
       "spec.readiness.checks[0].path.path", "absolute"},
      {"dot-dot escape", "    - name: a\n      path: {path: /sys/../etc/shadow}\n",
       "spec.readiness.checks[0].path.path", "normalised"},
      {"outside sysfs", "    - name: a\n      path: {path: /etc/shadow}\n",
       "spec.readiness.checks[0].path.path", "outside /sys and /proc"},
      {"a process's root", "    - name: a\n      path: {path: /proc/1/root/etc/shadow}\n",
       "spec.readiness.checks[0].path.path", "process's directory"},
      {"the agent's environment", "    - name: a\n      path: {path: /proc/self/environ}\n",
       "spec.readiness.checks[0].path.path", "process's directory"},
      {"reading kmsg consumes it", "    - name: a\n      path: {path: /proc/kmsg}\n",
       "spec.readiness.checks[0].path.path", "effect"},
      {"debugfs", "    - name: a\n      path: {path: /sys/kernel/debug/x}\n",
       "spec.readiness.checks[0].path.path", "debugfs"},
      {"the whole of sysfs", "    - name: a\n      path: {path: /sys}\n",
       "spec.readiness.checks[0].path.path", "whole filesystem"},
      {"equals and contains", "    - name: a\n      path: {path: /sys/module/m, equals: xx, contains: yy}\n",
       "spec.readiness.checks[0].path", "not both"},
      {"glob outside /dev", "    - name: a\n      devices: {glob: \"/etc/*\"}\n",
       "spec.readiness.checks[0].devices.glob", "/dev/"},
      {"glob escaping /dev", "    - name: a\n      devices: {glob: \"/dev/../etc/*\"}\n",
       "spec.readiness.checks[0].devices.glob", "normalised"},
      {"zero devices", "    - name: a\n      devices: {glob: \"/dev/x*\", count: 0}\n",
       "spec.readiness.checks[0].devices.count", "expected 1"},
      {"bad pattern", "    - name: a\n      kernelLog: {pattern: \"(unclosed\"}\n",
       "spec.readiness.checks[0].kernelLog.pattern", "RE2"},
      {"backreference (not RE2)", "    - name: a\n      kernelLog: {pattern: \"(a)\\\\1\"}\n",
       "spec.readiness.checks[0].kernelLog.pattern", "RE2"},
      {"empty pattern", "    - name: a\n      kernelLog: {pattern: \"\"}\n",
       "spec.readiness.checks[0].kernelLog.pattern", "required"},
      {"negative window", "    - name: a\n      kernelLog: {pattern: x, seconds: -1}\n",
       "spec.readiness.checks[0].kernelLog.seconds", "expected 0"},
      {"stable without seconds", "    - name: a\n      stable: {path: /sys/module/m/refcnt}\n",
       "spec.readiness.checks[0].stable.seconds", "required"},
      {"stable longer than its timeout",
       "    - name: a\n      stable: {path: /sys/module/m/refcnt, seconds: 90}\n",
       "spec.readiness.checks[0].timeoutSeconds", "never pass"},
      {"zero timeout", "    - name: a\n      path: {path: /sys/module/m}\n      timeoutSeconds: 0\n",
       "spec.readiness.checks[0].timeoutSeconds", "expected 1"},
      {"timeout of years", "    - name: a\n      path: {path: /sys/module/m}\n      timeoutSeconds: 99999999\n",
       "spec.readiness.checks[0].timeoutSeconds", "expected 1"},
      {"checks not a list", "      name: a\n", "spec.readiness.checks", "list"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    kmodd::testing::ExpectPolicyRejected(Checks(c.list), c.path, c.message);
  }
  // Seventeen checks: one too many.
  std::string many;
  for (int i = 0; i < 17; ++i) {
    many += "    - name: c" + std::to_string(i) + "\n      path: {path: /sys/module/m}\n";
  }
  const Decoded d = DecodeDocuments(Checks(many), "p.yaml");
  REQUIRE_FALSE(d.errors.empty());
  CHECK(d.errors.front().path == "spec.readiness.checks");
}

TEST_CASE("readiness checks: paths a check may read, and where they may not lead") {
  using kmodd::api::CheckPathProblem;
  CHECK(CheckPathProblem("/sys/module/gpu/version").empty());
  CHECK(CheckPathProblem("/sys/class/drm/card0").empty());
  CHECK(CheckPathProblem("/proc/modules").empty());
  CHECK(CheckPathProblem("/proc/driver/nvidia/version").empty());
  CHECK_FALSE(CheckPathProblem("/proc/42/environ").empty());
  CHECK_FALSE(CheckPathProblem("/proc/thread-self/root").empty());
  CHECK_FALSE(CheckPathProblem("/proc/kcore").empty());
  CHECK_FALSE(CheckPathProblem("/sys/kernel/tracing/trace_pipe").empty());
  CHECK_FALSE(CheckPathProblem("/sysfoo").empty());
  CHECK_FALSE(CheckPathProblem(std::string("/sys/a\0b", 8)).empty());
  CHECK_FALSE(CheckPathProblem("/sys/" + std::string(2000, 'a')).empty());
}

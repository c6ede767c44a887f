// Readiness (node-agent/server/readiness.h): the pure steps of each check kind and the
// verdict, as tables; then the Readiness class over AgentState with the agent's real reads
// of procfs (present and absent files) and a fake clock for the timeouts.

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "node-agent/kernel/devices.h"
#include "node-agent/kernel/kmsg.h"
#include "node-agent/server/readiness.h"
#include "tests/fakes/fake_clock.h"

using kmodd::agent::CheckObservation;
using kmodd::agent::CheckProgress;
using kmodd::agent::CheckState;
using kmodd::agent::StepCheck;
using kmodd::api::ReadinessCheck;

namespace {

ReadinessCheck PathCheck(std::string path, std::optional<std::string> equals = std::nullopt) {
  ReadinessCheck c;
  c.name = "p";
  c.kind = ReadinessCheck::Kind::kPath;
  c.path = std::move(path);
  c.equals = std::move(equals);
  c.timeout_seconds = 10;
  return c;
}

CheckObservation File(std::string content) {
  CheckObservation o;
  o.exists = true;
  o.content = std::move(content);
  return o;
}

CheckObservation Seen(void (*fill)(CheckObservation&, const std::string&), const std::string& v) {
  CheckObservation o;
  fill(o, v);
  return o;
}
void Refused(CheckObservation& o, const std::string& v) { o.refused = v; }
void Error(CheckObservation& o, const std::string& v) { o.error = v; }
void Match(CheckObservation& o, const std::string& v) { o.log_match = v; }
CheckObservation Devices(std::vector<std::string> d) {
  CheckObservation o;
  o.devices = std::move(d);
  return o;
}

}  // namespace

TEST_CASE("readiness step: path checks wait, pass on the content, fail at the timeout saying what was seen") {
  struct Case {
    const char* what;
    ReadinessCheck check;
    CheckObservation seen;
    int64_t elapsed_ms;
    CheckState want;
    const char* message;
  };
  const Case cases[] = {
      {"absent, in time", PathCheck("/sys/module/m/version"), {}, 500, CheckState::kWaiting,
       "does not exist"},
      {"absent at the timeout", PathCheck("/sys/module/m/version"), {}, 10000, CheckState::kFailed,
       "/sys/module/m/version does not exist after 10 s"},
      {"present", PathCheck("/sys/module/m"), File(""), 0, CheckState::kPassed, "exists"},
      {"the content, newline ignored", PathCheck("/sys/module/m/version", "2.0"), File("2.0\n"),
       10, CheckState::kPassed, "holds \"2.0\""},
      {"another content, in time", PathCheck("/sys/module/m/version", "2.0"), File("1.0\n"), 10,
       CheckState::kWaiting, "holds \"1.0\", expected \"2.0\""},
      {"another content at the timeout", PathCheck("/sys/module/m/version", "2.0"), File("1.0\n"),
       10001, CheckState::kFailed, "holds \"1.0\", expected \"2.0\" after 10 s"},
      {"resolves somewhere refused", PathCheck("/sys/x"),
       Seen(Refused, "/sys/x resolves to /etc/x"), 0, CheckState::kFailed,
       "resolves to /etc/x"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    CheckProgress p;
    StepCheck(c.check, c.elapsed_ms, c.seen, p);
    CHECK(p.state == c.want);
    CHECK_THAT(p.message, Catch::Contains(c.message));
  }
  // A long or multi-line value is shown bounded, on one line.
  CheckProgress p;
  StepCheck(PathCheck("/sys/m", "x"), 20000, File(std::string(1000, 'a') + "\nb"), p);
  CHECK(p.state == CheckState::kFailed);
  CHECK(p.message.find('\n') == std::string::npos);
  CHECK(p.message.size() < 400);
}

TEST_CASE("readiness step: devices, kernel log and stable values") {
  ReadinessCheck dev;
  dev.kind = ReadinessCheck::Kind::kDevices;
  dev.glob = "/dev/dri/renderD*";
  dev.count = 2;
  dev.timeout_seconds = 5;
  {
    CheckProgress p;
    StepCheck(dev, 100, Devices({"/dev/dri/renderD128"}), p);
    CHECK(p.state == CheckState::kWaiting);
    StepCheck(dev, 200, Devices({"/dev/dri/renderD128", "/dev/dri/renderD129"}), p);
    CHECK(p.state == CheckState::kPassed);
    // Passed is final: a device going away later does not undo it.
    StepCheck(dev, 300, CheckObservation{}, p);
    CHECK(p.state == CheckState::kPassed);
  }
  {
    CheckProgress p;
    StepCheck(dev, 5000, Devices({"/dev/dri/renderD128"}), p);
    CHECK(p.state == CheckState::kFailed);
    CHECK_THAT(p.message, Catch::Contains("1 device(s) match /dev/dri/renderD*, at least 2 expected after 5 s"));
  }
  {
    CheckProgress p;
    StepCheck(dev, 0, Seen(Error, "cannot list devices through udev (sysfs): EACCES"), p);
    CHECK(p.state == CheckState::kFailed);
  }

  ReadinessCheck log;
  log.kind = ReadinessCheck::Kind::kKernelLog;
  log.pattern = "probe of .* failed";
  log.seconds = 10;
  {
    CheckProgress p;
    StepCheck(log, 9999, CheckObservation{}, p);
    CHECK(p.state == CheckState::kWaiting);
    StepCheck(log, 10000, CheckObservation{}, p);
    CHECK(p.state == CheckState::kPassed);
  }
  {
    CheckProgress p;
    StepCheck(log, 3, Seen(Match, "gpu 0000:01:00.0: probe of x failed with -5"), p);
    CHECK(p.state == CheckState::kFailed);
    CHECK_THAT(p.message, Catch::Contains("probe of x failed with -5"));
  }

  ReadinessCheck st;
  st.kind = ReadinessCheck::Kind::kStable;
  st.path = "/sys/module/m/refcnt";
  st.seconds = 3;
  st.timeout_seconds = 10;
  {
    CheckProgress p;
    StepCheck(st, 0, File("0\n"), p);
    StepCheck(st, 2000, File("0\n"), p);
    CHECK(p.state == CheckState::kWaiting);
    StepCheck(st, 2500, File("1\n"), p);  // changed: the soak starts again
    StepCheck(st, 5000, File("1\n"), p);
    CHECK(p.state == CheckState::kWaiting);
    StepCheck(st, 5500, File("1\n"), p);
    CHECK(p.state == CheckState::kPassed);
    CHECK_THAT(p.message, Catch::Contains("stayed at \"1\" for 3 s"));
  }
  {
    CheckProgress p;
    for (int64_t t = 0; t <= 10000; t += 1000) {
      StepCheck(st, t, File(std::to_string(t)), p);  // changes every second
    }
    CHECK(p.state == CheckState::kFailed);
    CHECK_THAT(p.message, Catch::Contains("did not stay unchanged for 3 s within 10 s"));
  }
}

TEST_CASE("readiness verdict: the first failed check wins, then the first waiting, else Ready") {
  std::vector<ReadinessCheck> checks(2);
  checks[0].name = "version";
  checks[1].name = "render";
  checks[1].kind = ReadinessCheck::Kind::kDevices;
  std::vector<CheckProgress> p(2);
  p[0].message = "absent";
  auto v = kmodd::agent::Verdict(checks, p);
  CHECK(v.phase == kmodd::api::Phase::kAvailable);
  CHECK(v.message == "waiting for readiness check \"version\" (path): absent");
  p[0].state = CheckState::kPassed;
  p[1].state = CheckState::kFailed;
  p[1].message = "0 device(s)";
  v = kmodd::agent::Verdict(checks, p);
  CHECK(v.phase == kmodd::api::Phase::kFailed);
  CHECK_THAT(v.message, Catch::StartsWith("readiness check \"render\" (devices) failed: 0 device(s)"));
  p[1].state = CheckState::kPassed;
  CHECK(kmodd::agent::Verdict(checks, p).phase == kmodd::api::Phase::kLoaded);
}

TEST_CASE("kernel layer for checks: kmsg record text and device globs") {
  using kmodd::kernel::KmsgText;
  CHECK(KmsgText("6,339,5140900,-;kmm_ci_a: loaded\n SUBSYSTEM=module\n") == "kmm_ci_a: loaded");
  CHECK(KmsgText("3,1,2,-;a;b\n") == "a;b");
  CHECK(KmsgText("no separator") == "no separator");
  CHECK(KmsgText("") == "");
  const std::vector<std::string> nodes = {"/dev/dri/card0", "/dev/dri/renderD128",
                                          "/dev/dri/by-path/x-renderD1", "/dev/null"};
  CHECK(kmodd::kernel::MatchDeviceNodes(nodes, "/dev/dri/renderD*") ==
        std::vector<std::string>{"/dev/dri/renderD128"});
  CHECK(kmodd::kernel::MatchDeviceNodes(nodes, "/dev/*").size() == 1);  // '*' stops at '/'
  CHECK(kmodd::kernel::MatchDeviceNodes(nodes, "/dev/nvidia*").empty());
}

TEST_CASE("Readiness over AgentState: Available while a check waits, Ready, Failed at the timeout; a reload starts again") {
  kmodd::FakeClock clock;
  kmodd::agent::AgentState state(clock);
  kmodd::Logger log(stderr, kmodd::LogLevel::kError);
  kmodd::agent::Readiness readiness(state, log, clock);
  readiness.Start();

  kmodd::agent::ModuleStatus row;
  row.key = "ns/m";
  row.namespace_ = "ns";
  row.name = "m";
  row.phase = kmodd::api::Phase::kLoaded;
  ReadinessCheck present = PathCheck("/proc/version");
  present.name = "present";
  present.contains = "Linux";
  ReadinessCheck absent = PathCheck("/proc/kmodd-never-there");
  absent.name = "absent";
  absent.timeout_seconds = 3;
  auto phase = [&] {
    auto s = state.Snapshot();
    REQUIRE(s.modules.size() == 1);
    return s.modules[0];
  };

  readiness.Publish({row}, {{"ns/m", {{present, absent}, "v1"}}});
  auto m = phase();
  CHECK(m.phase == kmodd::api::Phase::kAvailable);
  CHECK_THAT(m.message, Catch::Contains("\"absent\" (path): /proc/kmodd-never-there does not exist"));
  REQUIRE(m.checks.size() == 2);
  CHECK(m.checks[0].state == "Passed");
  CHECK(m.checks[1].state == "Waiting");

  // The timeout on the agent's clock: the worker looks again and fails the check.
  clock.Advance(std::chrono::seconds(4));
  for (int i = 0; i < 200 && phase().phase != kmodd::api::Phase::kFailed; ++i) {
    clock.Advance(std::chrono::milliseconds(250));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  m = phase();
  CHECK(m.phase == kmodd::api::Phase::kFailed);
  CHECK(m.error_class == kmodd::agent::ErrorClass::kTerminal);
  CHECK_THAT(m.message, Catch::Contains("readiness check \"absent\" (path) failed: "
                                        "/proc/kmodd-never-there does not exist after 3 s"));
  // The reconciler publishing the same Loaded row again changes nothing: still Failed.
  readiness.Publish({row}, {{"ns/m", {{present, absent}, "v1"}}});
  CHECK(phase().phase == kmodd::api::Phase::kFailed);

  // A reload (Loading, then Loaded) runs the checks again: without the absent one, Ready.
  row.phase = kmodd::api::Phase::kLoading;
  readiness.Publish({row}, {{"ns/m", {{present}, "v2"}}});
  CHECK(phase().phase == kmodd::api::Phase::kLoading);
  row.phase = kmodd::api::Phase::kLoaded;
  readiness.Publish({row}, {{"ns/m", {{present}, "v2"}}});
  m = phase();
  CHECK(m.phase == kmodd::api::Phase::kLoaded);
  CHECK(m.message.empty());
  REQUIRE(m.checks.size() == 1);
  CHECK_THAT(m.checks[0].message, Catch::Contains("/proc/version holds \"Linux"));

  // A Module without checks is Ready when loaded, as before; nothing else is touched.
  kmodd::agent::ModuleStatus plain = row;
  plain.key = "ns/plain";
  plain.name = "plain";
  readiness.Publish({plain}, {});
  auto s = state.Snapshot();
  REQUIRE(s.modules.size() == 1);
  CHECK(s.modules[0].phase == kmodd::api::Phase::kLoaded);
  CHECK(s.modules[0].checks.empty());
  readiness.Stop();
}

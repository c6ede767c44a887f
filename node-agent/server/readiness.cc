#include "node-agent/server/readiness.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "api/names.h"
#include "common/fd.h"
#include "node-agent/kernel/devices.h"
#include "re2/re2.h"

namespace kmodd::agent {

namespace {

constexpr auto kTick = std::chrono::milliseconds(250);
constexpr size_t kMaxContent = 4096;
constexpr size_t kMaxShown = 200;

// A value as a message shows it: quoted, one line, bounded.
std::string Shown(std::string_view v) {
  std::string s(v.substr(0, kMaxShown));
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') {
      c = ' ';
    }
  }
  return absl::StrCat(api::Quote(s), v.size() > kMaxShown ? "..." : "");
}

std::string_view Trimmed(std::string_view v) {
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) {
    v.remove_suffix(1);
  }
  return v;
}

std::string Secs(int64_t ms) { return absl::StrCat(ms / 1000, " s"); }

bool NeedsContent(const api::ReadinessCheck& c) {
  return c.kind == api::ReadinessCheck::Kind::kStable || c.equals || c.contains;
}

}  // namespace

const char* CheckStateName(CheckState s) {
  switch (s) {
    case CheckState::kWaiting:
      return "Waiting";
    case CheckState::kPassed:
      return "Passed";
    case CheckState::kFailed:
      return "Failed";
  }
  return "Waiting";
}

void StepCheck(const api::ReadinessCheck& c, int64_t elapsed_ms, const CheckObservation& o,
               CheckProgress& p) {
  if (p.state != CheckState::kWaiting) {
    return;
  }
  const int64_t timeout_ms = c.timeout_seconds * 1000;
  auto pass = [&](std::string m) {
    p.state = CheckState::kPassed;
    p.message = std::move(m);
  };
  auto fail = [&](std::string m) {
    p.state = CheckState::kFailed;
    p.message = std::move(m);
  };
  if (!o.refused.empty()) {
    return fail(o.refused);
  }
  if (!o.error.empty()) {
    return fail(o.error);
  }
  switch (c.kind) {
    case api::ReadinessCheck::Kind::kPath: {
      std::string seen;
      bool ok = o.exists;
      if (!o.exists) {
        seen = absl::StrCat(c.path, " does not exist");
      } else if (c.equals && Trimmed(o.content) != *c.equals) {
        ok = false;
        seen = absl::StrCat(c.path, " holds ", Shown(Trimmed(o.content)), ", expected ",
                            Shown(*c.equals));
      } else if (c.contains && o.content.find(*c.contains) == std::string::npos) {
        ok = false;
        seen = absl::StrCat(c.path, " holds ", Shown(Trimmed(o.content)), ", which does not "
                            "contain ", Shown(*c.contains));
      }
      if (ok) {
        return pass(NeedsContent(c) ? absl::StrCat(c.path, " holds ", Shown(Trimmed(o.content)))
                                    : absl::StrCat(c.path, " exists"));
      }
      if (elapsed_ms >= timeout_ms) {
        return fail(absl::StrCat(seen, " after ", Secs(timeout_ms)));
      }
      p.message = seen;
      return;
    }
    case api::ReadinessCheck::Kind::kDevices: {
      const int64_t n = static_cast<int64_t>(o.devices.size());
      if (n >= c.count) {
        return pass(absl::StrCat(n, " device(s) match ", c.glob, ": ", o.devices.front(),
                                 n > 1 ? ", ..." : ""));
      }
      std::string seen =
          absl::StrCat(n, " device(s) match ", c.glob, ", at least ", c.count, " expected");
      if (elapsed_ms >= timeout_ms) {
        return fail(absl::StrCat(seen, " after ", Secs(timeout_ms)));
      }
      p.message = seen;
      return;
    }
    case api::ReadinessCheck::Kind::kKernelLog: {
      if (o.log_match) {
        return fail(absl::StrCat("kernel log line matches /", c.pattern, "/: ", Shown(*o.log_match)));
      }
      if (elapsed_ms >= c.seconds * 1000) {
        return pass(absl::StrCat("no kernel log line matches /", c.pattern, "/ in ",
                                 Secs(c.seconds * 1000), " since the load"));
      }
      p.message = absl::StrCat("watching the kernel log for /", c.pattern, "/");
      return;
    }
    case api::ReadinessCheck::Kind::kStable: {
      const std::string value = o.exists ? std::string(Trimmed(o.content)) : "(absent)";
      if (!p.value || *p.value != value) {
        if (p.value) {
          p.message = absl::StrCat(c.path, " changed from ", Shown(*p.value), " to ", Shown(value));
        }
        p.value = value;
        p.value_since_ms = elapsed_ms;
      }
      const int64_t held = elapsed_ms - p.value_since_ms;
      if (o.exists && held >= c.seconds * 1000) {
        return pass(absl::StrCat(c.path, " stayed at ", Shown(value), " for ", Secs(held)));
      }
      if (elapsed_ms >= timeout_ms) {
        return fail(absl::StrCat(c.path, o.exists ? " did not stay unchanged for " : " does not exist; not stable for ",
                                 Secs(c.seconds * 1000), " within ", Secs(timeout_ms), " (now ",
                                 Shown(value), ")"));
      }
      if (p.message.empty() || p.value_since_ms != elapsed_ms) {
        p.message = absl::StrCat(c.path, " at ", Shown(value), " for ", Secs(held));
      }
      return;
    }
  }
}

ReadinessVerdict Verdict(const std::vector<api::ReadinessCheck>& checks,
                         const std::vector<CheckProgress>& progress) {
  for (size_t i = 0; i < checks.size() && i < progress.size(); ++i) {
    if (progress[i].state == CheckState::kFailed) {
      return {api::Phase::kFailed,
              absl::StrCat("readiness check \"", checks[i].name, "\" (",
                           api::CheckKindName(checks[i].kind), ") failed: ", progress[i].message,
                           "; the module stays loaded, not Ready, until the desired state "
                           "changes")};
    }
  }
  for (size_t i = 0; i < checks.size() && i < progress.size(); ++i) {
    if (progress[i].state == CheckState::kWaiting) {
      return {api::Phase::kAvailable,
              absl::StrCat("waiting for readiness check \"", checks[i].name, "\" (",
                           api::CheckKindName(checks[i].kind), "): ", progress[i].message)};
    }
  }
  return {api::Phase::kLoaded, ""};
}

Readiness::Readiness(AgentState& state, Logger& log, const Clock& clock)
    : state_(state), log_(log), clock_(clock) {}

Readiness::~Readiness() { Stop(); }

void Readiness::Start() {
  worker_ = std::thread([this] { Worker(); });
}

void Readiness::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) {
    worker_.join();
  }
}

void Readiness::DevicesChanged() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    devices_dirty_ = true;
    wake_ = true;
  }
  cv_.notify_all();
}

void Readiness::PollDevices() {
  std::lock_guard<std::mutex> lock(mu_);
  poll_devices_ = true;
}

void Readiness::Publish(std::vector<ModuleStatus> rows,
                        const std::map<std::string, ReadinessInput>& in) {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::string> keep;
  for (const ModuleStatus& row : rows) {
    auto it = in.find(row.key);
    if (it == in.end() || it->second.checks.empty()) {
      continue;
    }
    const ReadinessInput& ri = it->second;
    const bool logs = std::any_of(ri.checks.begin(), ri.checks.end(), [](const auto& c) {
      return c.kind == api::ReadinessCheck::Kind::kKernelLog;
    });
    if (row.phase == api::Phase::kLoading) {
      runs_.erase(row.key);  // a (re)load: the run starts again once it is Loaded
      if (logs && loading_.count(row.key) == 0) {
        auto reader = kernel::KmsgReader::OpenAtEnd();
        loading_[row.key] = reader.ok() ? std::optional<kernel::KmsgReader>(std::move(*reader))
                                        : std::nullopt;
      }
      keep.insert(row.key);
      continue;
    }
    if (row.phase != api::Phase::kLoaded) {
      continue;
    }
    keep.insert(row.key);
    auto run = runs_.find(row.key);
    if (run != runs_.end() && run->second.checks == ri.checks &&
        run->second.identity == ri.identity) {
      continue;
    }
    Run r;
    r.checks = ri.checks;
    r.identity = ri.identity;
    r.started = clock_.MonotonicNow();
    r.progress.resize(ri.checks.size());
    if (logs) {
      if (auto l = loading_.find(row.key); l != loading_.end() && l->second) {
        r.kmsg = std::move(l->second);
      } else if (auto reader = kernel::KmsgReader::OpenAtEnd(); reader.ok()) {
        r.kmsg = std::move(*reader);
      } else {
        r.kmsg_error = std::string(reader.status().message());
      }
    }
    loading_.erase(row.key);
    log_.Info("readiness checks started", {{"module", row.key}, {"checks", std::to_string(r.checks.size())}});
    runs_[row.key] = std::move(r);
  }
  for (auto it = runs_.begin(); it != runs_.end();) {
    it = keep.count(it->first) != 0 ? std::next(it) : runs_.erase(it);
  }
  for (auto it = loading_.begin(); it != loading_.end();) {
    it = keep.count(it->first) != 0 ? std::next(it) : loading_.erase(it);
  }
  rows_ = std::move(rows);
  (void)EvaluateLocked();
  ApplyLocked();
  wake_ = true;
  cv_.notify_all();
}

CheckObservation Readiness::ObserveLocked(const api::ReadinessCheck& c, Run& run) {
  CheckObservation o;
  switch (c.kind) {
    case api::ReadinessCheck::Kind::kPath:
    case api::ReadinessCheck::Kind::kStable: {
      // The rules again on where the path leads: a symlink in sysfs may point anywhere in
      // sysfs, never out of it, nor into a process's directory.
      char real[PATH_MAX];
      if (::realpath(c.path.c_str(), real) == nullptr) {
        return o;  // does not exist (yet)
      }
      if (!api::CheckPathProblem(real).empty()) {
        o.refused = absl::StrCat(c.path, " resolves to ", real, ", which checks may not read");
        return o;
      }
      struct stat st{};
      if (::stat(real, &st) != 0) {
        return o;
      }
      o.exists = true;
      if (!NeedsContent(c)) {
        return o;
      }
      if (!S_ISREG(st.st_mode)) {
        o.refused = absl::StrCat(c.path, " is not a file: its content cannot be compared");
        return o;
      }
      Fd fd(::open(real, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
      if (!fd.valid()) {
        o.exists = errno != ENOENT;
        if (o.exists) {
          o.error = absl::StrCat("cannot read ", c.path, ": ", std::strerror(errno));
        }
        return o;
      }
      char buf[kMaxContent];
      const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
      if (n < 0) {
        // A sysfs attribute whose show() fails (the driver says EIO, ENODEV): not a value.
        o.content = absl::StrCat("(read failed: ", std::strerror(errno), ")");
        return o;
      }
      o.content.assign(buf, static_cast<size_t>(n));
      return o;
    }
    case api::ReadinessCheck::Kind::kDevices: {
      if (devices_dirty_) {
        auto nodes = kernel::ListDeviceNodes();
        device_error_ = nodes.ok() ? "" : std::string(nodes.status().message());
        device_nodes_ = nodes.ok() ? std::move(*nodes) : std::vector<std::string>{};
        devices_dirty_ = false;
      }
      o.error = device_error_;
      o.devices = kernel::MatchDeviceNodes(device_nodes_, c.glob);
      return o;
    }
    case api::ReadinessCheck::Kind::kKernelLog: {
      if (!run.kmsg) {
        o.error = run.kmsg_error.empty() ? "cannot read the kernel log" : run.kmsg_error;
        return o;
      }
      if (!run.log_match) {
        RE2::Options opts;
        opts.set_log_errors(false);
        opts.set_max_mem(1 << 20);
        RE2 re(c.pattern, opts);
        absl::Status s = run.kmsg->ReadNew([&](std::string_view line) {
          if (!run.log_match && re.ok() && RE2::PartialMatch(line, re)) {
            run.log_match = std::string(line);
          }
        });
        if (!s.ok()) {
          o.error = std::string(s.message());
        }
      }
      o.log_match = run.log_match;
      return o;
    }
  }
  return o;
}

bool Readiness::EvaluateLocked() {
  bool changed = false;
  const auto now = clock_.MonotonicNow();
  devices_dirty_ = devices_dirty_ || poll_devices_;
  for (auto& [key, run] : runs_) {
    if (run.verdict.phase != api::Phase::kAvailable && !run.progress.empty() &&
        std::none_of(run.progress.begin(), run.progress.end(),
                     [](const CheckProgress& p) { return p.state == CheckState::kWaiting; })) {
      continue;
    }
    const int64_t elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - run.started).count();
    for (size_t i = 0; i < run.checks.size(); ++i) {
      if (run.progress[i].state == CheckState::kWaiting) {
        StepCheck(run.checks[i], elapsed, ObserveLocked(run.checks[i], run), run.progress[i]);
      }
    }
    ReadinessVerdict v = Verdict(run.checks, run.progress);
    if (!(v == run.verdict)) {
      changed = true;
      if (v.phase != api::Phase::kAvailable && !run.logged) {
        run.logged = true;
        if (v.phase == api::Phase::kFailed) {
          log_.Warn("readiness check failed", {{"module", key}, {"error", v.message}});
        } else {
          log_.Info("module ready: every readiness check passed",
                    {{"module", key}, {"ms", std::to_string(elapsed)}});
        }
      }
      run.verdict = std::move(v);
    }
  }
  return changed;
}

void Readiness::ApplyLocked() {
  std::vector<ModuleStatus> rows = rows_;
  for (ModuleStatus& row : rows) {
    auto it = runs_.find(row.key);
    if (it == runs_.end() || row.phase != api::Phase::kLoaded) {
      continue;
    }
    const Run& run = it->second;
    row.phase = run.verdict.phase;
    row.message = run.verdict.message;
    row.error_class = run.verdict.phase == api::Phase::kFailed ? ErrorClass::kTerminal
                                                               : ErrorClass::kNone;
    row.checks.clear();
    for (size_t i = 0; i < run.checks.size(); ++i) {
      row.checks.push_back(CheckResult{run.checks[i].name, CheckStateName(run.progress[i].state),
                                       run.progress[i].message});
    }
  }
  state_.SetModules(std::move(rows));
}

void Readiness::Worker() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const bool waiting = std::any_of(runs_.begin(), runs_.end(), [](const auto& kv) {
      return kv.second.verdict.phase == api::Phase::kAvailable;
    });
    wake_ = false;
    if (waiting) {
      clock_.WaitFor(lock, cv_, kTick, [this] { return stop_ || wake_; });
    } else {
      clock_.WaitFor(lock, cv_, std::chrono::hours(1), [this] { return stop_ || wake_; });
    }
    if (stop_) {
      break;
    }
    if (EvaluateLocked()) {
      ApplyLocked();
    }
  }
}

}  // namespace kmodd::agent

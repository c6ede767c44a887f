#include "api/readiness.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "api/names.h"
#include "re2/re2.h"

namespace kmodd::api {

namespace {

constexpr size_t kMaxPath = 1024;
constexpr size_t kMaxText = 1024;
constexpr int64_t kMaxSeconds = int64_t{24} * 3600;
constexpr int64_t kMaxDevices = 4096;

}  // namespace

std::string CheckPathProblem(const std::string& path) {
  if (path.empty()) {
    return "required: an absolute path under /sys or /proc";
  }
  if (path.size() > kMaxPath) {
    return absl::StrCat("longer than ", kMaxPath, " characters");
  }
  if (path.find('\0') != std::string::npos) {
    return "contains a NUL character";
  }
  if (path.front() != '/' || CleanPath(path) != path) {
    return absl::StrCat(Quote(path), " is not an absolute, normalised path (no \".\", \"..\", "
                        "\"//\" or trailing \"/\")");
  }
  if (!IsUnder(path, "/sys") && !IsUnder(path, "/proc")) {
    return absl::StrCat(Quote(path), " is outside /sys and /proc: checks read only what the "
                        "kernel exposes");
  }
  if (path == "/sys" || path == "/proc") {
    return absl::StrCat(Quote(path), " is a whole filesystem; name the attribute to check");
  }
  if (IsUnder(path, "/proc")) {
    const std::string first = path.substr(6, path.find('/', 6) - 6);
    const bool pid = !first.empty() && first.find_first_not_of("0123456789") == std::string::npos;
    if (pid || first == "self" || first == "thread-self") {
      return absl::StrCat(Quote(path), " is a process's directory; checks read the kernel's "
                          "state, not a process's");
    }
    if (first == "kmsg" || first == "kcore" || first == "sysrq-trigger") {
      return absl::StrCat(Quote(path), " cannot be read without an effect; use a kernelLog "
                          "check for the kernel log");
    }
  }
  if (IsUnder(path, "/sys/kernel/debug") || IsUnder(path, "/sys/kernel/tracing")) {
    return absl::StrCat(Quote(path), " is debugfs or tracefs, whose reads can have effects");
  }
  return "";
}

namespace {

std::string GlobProblem(const std::string& glob) {
  if (glob.empty()) {
    return "required: a pattern of device nodes under /dev, e.g. /dev/dri/renderD*";
  }
  if (glob.size() > kMaxPath) {
    return absl::StrCat("longer than ", kMaxPath, " characters");
  }
  if (glob.find('\0') != std::string::npos) {
    return "contains a NUL character";
  }
  if (!glob.starts_with("/dev/") || CleanPath(glob) != glob) {
    return absl::StrCat(Quote(glob), " is not a normalised pattern under /dev/");
  }
  return "";
}

}  // namespace

const char* CheckKindName(ReadinessCheck::Kind k) {
  switch (k) {
    case ReadinessCheck::Kind::kPath:
      return "path";
    case ReadinessCheck::Kind::kDevices:
      return "devices";
    case ReadinessCheck::Kind::kKernelLog:
      return "kernelLog";
    case ReadinessCheck::Kind::kStable:
      return "stable";
  }
  return "path";
}

std::string CheckSubject(const ReadinessCheck& c) {
  switch (c.kind) {
    case ReadinessCheck::Kind::kPath:
    case ReadinessCheck::Kind::kStable:
      return c.path;
    case ReadinessCheck::Kind::kDevices:
      return c.glob;
    case ReadinessCheck::Kind::kKernelLog:
      return absl::StrCat("kernel log /", c.pattern, "/");
  }
  return c.path;
}

std::vector<FieldError> ValidateReadinessChecks(const std::vector<ReadinessCheck>& checks,
                                                const std::string& field) {
  std::vector<FieldError> out;
  if (checks.size() > kMaxReadinessChecks) {
    out.push_back({field, absl::StrCat(checks.size(), " checks; at most ",
                                       kMaxReadinessChecks, " per Module")});
  }
  std::set<std::string> names;
  for (size_t i = 0; i < checks.size(); ++i) {
    const ReadinessCheck& c = checks[i];
    const std::string at = absl::StrCat(field, "[", i, "]");
    auto add = [&](const char* sub, std::string message) {
      out.push_back({absl::StrCat(at, sub), std::move(message)});
    };
    if (c.name.empty()) {
      add(".name", "required: it names the check in the node's status and in Events");
    } else if (!IsDnsLabel(c.name)) {
      add(".name", absl::StrCat(Quote(c.name), " is not a lowercase RFC 1123 label"));
    } else if (!names.insert(c.name).second) {
      add(".name", absl::StrCat(Quote(c.name), " is used by an earlier check"));
    }
    if (c.timeout_seconds < 1 || c.timeout_seconds > kMaxSeconds) {
      add(".timeoutSeconds", absl::StrCat(c.timeout_seconds, ": expected 1 to ", kMaxSeconds));
    }
    if (c.seconds < 0 || c.seconds > kMaxSeconds) {
      const char* sub = c.kind == ReadinessCheck::Kind::kKernelLog ? ".kernelLog.seconds"
                                                                    : ".stable.seconds";
      add(sub, absl::StrCat(c.seconds, ": expected 0 to ", kMaxSeconds));
    }
    switch (c.kind) {
      case ReadinessCheck::Kind::kPath: {
        if (std::string p = CheckPathProblem(c.path); !p.empty()) {
          add(".path.path", std::move(p));
        }
        if (c.equals && c.contains) {
          add(".path", "give equals or contains, not both");
        }
        for (const auto* text : {&c.equals, &c.contains}) {
          if (*text && (*text)->size() > kMaxText) {
            add(text == &c.equals ? ".path.equals" : ".path.contains",
                absl::StrCat("longer than ", kMaxText, " characters"));
          }
        }
        break;
      }
      case ReadinessCheck::Kind::kStable:
        if (std::string p = CheckPathProblem(c.path); !p.empty()) {
          add(".stable.path", std::move(p));
        }
        if (c.seconds < 1) {
          add(".stable.seconds", "required: how long the value must stay unchanged (at least 1)");
        } else if (c.seconds >= c.timeout_seconds && c.timeout_seconds >= 1) {
          add(".timeoutSeconds",
              absl::StrCat(c.timeout_seconds, " is not longer than stable.seconds (", c.seconds,
                           "): the check could never pass"));
        }
        break;
      case ReadinessCheck::Kind::kDevices:
        if (std::string p = GlobProblem(c.glob); !p.empty()) {
          add(".devices.glob", std::move(p));
        }
        if (c.count < 1 || c.count > kMaxDevices) {
          add(".devices.count", absl::StrCat(c.count, ": expected 1 to ", kMaxDevices));
        }
        break;
      case ReadinessCheck::Kind::kKernelLog: {
        if (c.pattern.empty()) {
          add(".kernelLog.pattern", "required: an RE2 pattern of the lines that fail the check");
        } else if (c.pattern.size() > kMaxText) {
          add(".kernelLog.pattern", absl::StrCat("longer than ", kMaxText, " characters"));
        } else {
          RE2::Options o;
          o.set_log_errors(false);
          o.set_max_mem(1 << 20);
          RE2 re(c.pattern, o);
          if (!re.ok()) {
            add(".kernelLog.pattern",
                absl::StrCat(Quote(c.pattern), " is not a valid RE2 pattern: ", re.error()));
          }
        }
        break;
      }
    }
  }
  return out;
}

}  // namespace kmodd::api

#include "tools/agentctl/format.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/phase.h"
#include "proto/convert.h"
#include "tools/agentctl/table.h"

namespace kmodd::agentctl {

namespace {

constexpr int64_t kMinute = 60;
constexpr int64_t kHour = 60 * kMinute;
constexpr int64_t kDay = 24 * kHour;
constexpr int64_t kYear = 365 * kDay;

// "3m" or "3m20s": the remainder is shown only when it is not zero.
std::string WithRest(int64_t big, const char* big_unit, int64_t rest, const char* rest_unit) {
  if (rest == 0) {
    return absl::StrCat(big, big_unit);
  }
  return absl::StrCat(big, big_unit, rest, rest_unit);
}

std::string ModuleKey(const v1::ModuleStatus& m) {
  return absl::StrCat(m.namespace_(), "/", m.name());
}

std::string StatusMessage(const v1::ModuleStatus& m) {
  if (m.phase() == v1::PULLING && (m.pull_bytes_done() > 0 || m.pull_bytes_total() > 0)) {
    const std::string progress = PullProgress(m.pull_bytes_done(), m.pull_bytes_total());
    return m.message().empty() ? progress : absl::StrCat(m.message(), ": ", progress);
  }
  return m.message();
}

std::string ErrorClassName(v1::ErrorClass c) {
  switch (c) {
    case v1::ERROR_NONE:
      return "<none>";
    case v1::ERROR_RETRY:
      return "Retry";
    case v1::ERROR_WAIT:
      return "Wait";
    case v1::ERROR_TERMINAL:
      return "Terminal";
    default:
      return absl::StrCat("ErrorClass(", static_cast<int>(c), ")");
  }
}

}  // namespace

std::string HumanAge(int64_t now_ms, int64_t since_ms) {
  if (since_ms == 0) {
    return "<unknown>";
  }
  // Go's int(d.Seconds()) truncates toward zero, so -1.5s is "0s" and -2s is invalid.
  const int64_t s = (now_ms - since_ms) / 1000;
  if (s < -1) {
    return "<invalid>";
  }
  if (s < 0) {
    return "0s";
  }
  if (s < 2 * kMinute) {
    return absl::StrCat(s, "s");
  }
  const int64_t minutes = s / kMinute;
  if (minutes < 10) {
    return WithRest(minutes, "m", s % kMinute, "s");
  }
  if (minutes < 180) {
    return absl::StrCat(minutes, "m");
  }
  const int64_t hours = s / kHour;
  if (hours < 8) {
    return WithRest(hours, "h", minutes % 60, "m");
  }
  if (hours < 48) {
    return absl::StrCat(hours, "h");
  }
  if (hours < 192) {  // 8 days
    return WithRest(hours / 24, "d", hours % 24, "h");
  }
  const int64_t days = s / kDay;
  if (days < 730) {  // 2 years
    return absl::StrCat(days, "d");
  }
  if (days < 2920) {  // 8 years
    return WithRest(s / kYear, "y", days % 365, "d");
  }
  return absl::StrCat(s / kYear, "y");
}

std::string ShortDigest(const std::string& digest) {
  if (digest.empty()) {
    return "<none>";
  }
  const size_t colon = digest.find(':');
  const std::string hex = colon == std::string::npos ? digest : digest.substr(colon + 1);
  return hex.substr(0, 12);
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) {
    return absl::StrCat(bytes, " B");
  }
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (v >= 1024 && unit + 1 < std::size(kUnits)) {
    v /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", v, kUnits[unit]);
}

std::string PullProgress(int64_t done, int64_t total) {
  if (total <= 0) {
    return absl::StrCat("pulled ", FormatBytes(done));
  }
  // Floor, so that 100% means done.
  const int64_t percent = done >= total ? 100 : done * 100 / total;
  return absl::StrCat("pulled ", FormatBytes(done), " / ", FormatBytes(total), " (", percent,
                      "%)");
}

std::string PhaseName(v1::Phase phase) {
  if (!v1::Phase_IsValid(phase)) {
    return absl::StrCat("Phase(", static_cast<int>(phase), ")");  // a newer agent's
  }
  return std::string(api::PhaseName(proto::FromProto(phase)));
}

std::string StatusHeader(const v1::StatusResponse& s, int64_t now_ms) {
  const v1::NodeInfo& n = s.node();
  std::string controller = s.controller().empty() ? "controller" : s.controller();
  absl::StrAppend(&controller, s.controller_connected() ? " connected " : " disconnected ",
                  HumanAge(now_ms, s.controller_since_unix_ms()));
  std::string out = absl::StrCat("Node: ", OrNone(n.name()), "   Kernel: ",
                                 OrNone(n.kernel_release()), "   Controller: ", controller);
  if (!s.desired_version().empty()) {
    absl::StrAppend(&out, "   Desired: ", s.desired_version());
    if (!s.desired_source().empty()) {
      absl::StrAppend(&out, " (", s.desired_source(), ")");
    }
  }
  out += '\n';
  if (!s.overrides().empty()) {
    absl::StrAppend(&out, "Overrides (until the next desired state): ",
                    absl::StrJoin(s.overrides(), ", "), "\n");
  }
  return out;
}

std::string StatusTable(const v1::StatusResponse& s, int64_t now_ms, bool wide) {
  if (s.modules().empty()) {
    return "No modules on this node.\n";
  }
  std::vector<Row> rows;
  Row header = {"MODULE", "PHASE", "VERSION", "IMAGE-DIGEST", "SINCE", "MESSAGE"};
  if (wide) {
    header.insert(header.end(), {"ERROR", "IMAGE", "DESIRED", "KERNEL-MODULES"});
  }
  rows.push_back(std::move(header));
  for (const auto& m : s.modules()) {
    Row r = {ModuleKey(m),       PhaseName(m.phase()),
             OrNone(m.version()), ShortDigest(m.image_digest()),
             HumanAge(now_ms, m.since_unix_ms()), StatusMessage(m)};
    if (wide) {
      // The message may hold spaces; in wide output it would misalign what follows.
      if (r.back().empty()) {
        r.back() = "<none>";
      }
      r.insert(r.end(), {ErrorClassName(m.error_class()), OrNone(m.image()),
                         OrNone(m.desired_version()),
                         JoinOrNone({m.kernel_modules().begin(), m.kernel_modules().end()})});
    }
    rows.push_back(std::move(r));
  }
  std::string out = RenderTable(rows);
  // Nothing failed, but the operator should know (staged firmware shadowing the host's).
  std::string warnings;
  for (const auto& m : s.modules()) {
    for (const auto& w : m.warnings()) {
      absl::StrAppend(&warnings, "  ", ModuleKey(m), ": ", w, "\n");
    }
  }
  if (!warnings.empty()) {
    absl::StrAppend(&out, "\nWarnings:\n", warnings);
  }
  // The readiness checks of each Module that has some (Available until all passed).
  std::vector<Row> checks;
  for (const auto& m : s.modules()) {
    for (const auto& c : m.checks()) {
      if (checks.empty()) {
        checks.push_back({"MODULE", "CHECK", "STATE", "SEEN"});
      }
      checks.push_back({ModuleKey(m), c.name(), c.state(), c.message()});
    }
  }
  if (!checks.empty()) {
    absl::StrAppend(&out, "\nReadiness checks:\n", RenderTable(checks));
  }
  return out;
}

std::string EventsHeader() { return absl::StrFormat("%-12s %-16s %-28s %s\n", "TIME", "KIND", "MODULE", "MESSAGE"); }

std::string EventLine(const v1::Event& e, absl::TimeZone tz) {
  const std::string time =
      absl::FormatTime("%H:%M:%E3S", absl::FromUnixMillis(e.unix_ms()), tz);
  std::string message = e.message();
  if (e.kind() == "PullProgress" || e.bytes_total() > 0 || e.bytes_done() > 0) {
    message = PullProgress(e.bytes_done(), e.bytes_total());
  }
  if (e.kind() == "PhaseChanged") {
    message = message.empty() ? PhaseName(e.phase()) : absl::StrCat(PhaseName(e.phase()), ": ", message);
  }
  std::string line = absl::StrFormat("%-12s %-16s %-28s %s", time, e.kind(),
                                     e.module().empty() ? "-" : e.module(), message);
  line.erase(line.find_last_not_of(' ') + 1);
  line += '\n';
  return line;
}

std::string PlanText(const v1::PreviewPassResponse& p) {
  std::string out;
  if (p.actions().empty()) {
    out = "Nothing to do: the node runs its desired state.\n";
  } else {
    std::vector<Row> rows = {{"ACTION", "MODULE", "REASON"}};
    for (const auto& a : p.actions()) {
      rows.push_back({a.kind(), a.module(), a.reason()});
    }
    out = RenderTable(rows);
  }
  if (!p.problems().empty()) {
    out += "\nProblems:\n";
    for (const auto& problem : p.problems()) {
      absl::StrAppend(&out, "  ", problem, "\n");
    }
  }
  return out;
}

std::string FirmwareText(const v1::FirmwareResponse& f) {
  std::string out;
  if (!f.directory().empty()) {
    absl::StrAppend(&out, "Firmware directory: ", f.directory(), "\n");
  }
  if (f.files().empty()) {
    return out + "No firmware staged.\n";
  }
  std::vector<Row> rows = {{"PATH", "OWNERS", "SHADOWS"}};
  for (const auto& file : f.files()) {
    rows.push_back({file.path(), JoinOrNone({file.owners().begin(), file.owners().end()}),
                    OrNone(file.shadows())});
  }
  return out + RenderTable(rows);
}

std::string ImagesText(const v1::ImagesResponse& r, bool pruned) {
  std::string out;
  if (pruned) {
    if (r.pruned().empty()) {
      out = "Nothing to prune.\n";
    }
    for (const auto& tree : r.pruned()) {
      absl::StrAppend(&out, "removed ", tree, "\n");
    }
  }
  if (r.images().empty()) {
    return out + "No cached images.\n";
  }
  std::vector<Row> rows = {{"TREE", "REFERENCES", "IN-USE", "SIZE"}};
  for (const auto& i : r.images()) {
    rows.push_back({i.tree(), JoinOrNone({i.references().begin(), i.references().end()}),
                    i.in_use() ? "yes" : "no", FormatBytes(i.bytes())});
  }
  if (pruned) {
    out += '\n';
  }
  return out + RenderTable(rows);
}

}  // namespace kmodd::agentctl

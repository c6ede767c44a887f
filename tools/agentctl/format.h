#pragma once

// agentctl's pure formatting: Agent service responses -> text a person reads. No I/O, no
// clock: `now_ms` and the time zone come from the caller, so the tests pin them.

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "kmodd/v1/agent.pb.h"

namespace kmodd::agentctl {

// Elapsed time as kubectl's AGE column prints it (5s, 3m20s, 2h, 4d): "<unknown>" when
// `since_ms` is 0, "0s" for a clock slightly behind.
std::string HumanAge(int64_t now_ms, int64_t since_ms);

// The first 12 hex digits of "sha256:<hex>" (as `docker images` shortens), "<none>" if empty.
std::string ShortDigest(const std::string& digest);

// 1.5 KiB, 12.3 MiB, 2.0 GiB; "512 B" under a KiB.
std::string FormatBytes(int64_t bytes);

// "pulled 12.3 MiB / 100.0 MiB (12%)"; without a known total, "pulled 12.3 MiB".
std::string PullProgress(int64_t done, int64_t total);

// PENDING -> "Pending": the spelling people read; -o json|yaml keep the proto names.
std::string PhaseName(v1::Phase phase);

// `status`: a line about the node and the controller, then one row per module, then the
// modules' warnings, if any.
std::string StatusHeader(const v1::StatusResponse& s, int64_t now_ms);
std::string StatusTable(const v1::StatusResponse& s, int64_t now_ms, bool wide);

// `events`: "TIME KIND MODULE MESSAGE", one event per line, in columns of fixed width so
// that a followed stream stays aligned.
std::string EventsHeader();
std::string EventLine(const v1::Event& e, absl::TimeZone tz);

// `plan`: the actions and the problems, or a sentence saying there is nothing to do.
std::string PlanText(const v1::PreviewPassResponse& p);

// `firmware`: PATH OWNERS SHADOWS (the host's own file that the staged one hides from the
// kernel, "<none>" when none).
std::string FirmwareText(const v1::FirmwareResponse& f);

// `images`: TREE REFERENCES IN-USE SIZE, then what --prune removed.
std::string ImagesText(const v1::ImagesResponse& r, bool pruned);

}  // namespace kmodd::agentctl

// agentctl events [-f] [--replay]: without -f, the events the agent keeps in memory; with
// -f, new events as they come (after the kept ones with --replay) until interrupted.

#include <optional>

#include "absl/time/time.h"
#include "tools/agentctl/command.h"
#include "tools/agentctl/format.h"

namespace kmodd::agentctl {

namespace {

// The stream does not mark the end of the replayed backlog, which the agent sends at once;
// without -f, a local stream quiet for this long has sent it all.
constexpr absl::Duration kReplayQuiet = absl::Milliseconds(500);

}  // namespace

int EventsCommand(const Context& ctx, const std::vector<std::string>& args) {
  bool follow = false;
  bool replay_too = false;
  flags::FlagSet flags("agentctl events", ctx.usage);
  flags.Switch("-f,--follow", "new events as they come, until interrupted", &follow);
  flags.Switch("--replay", "with -f: the recent events first", &replay_too);
  if (std::optional<int> exit = ctx.Parse(flags, args)) {
    return *exit;
  }
  const bool replay = !follow || replay_too;
  auto client = ctx.Dial();
  if (!client.ok()) {
    return ctx.Fail(client.status());
  }
  const absl::TimeZone tz = absl::LocalTimeZone();
  ctx.out << EventsHeader() << std::flush;
  absl::Status s = (*client)->Events(replay, follow ? absl::ZeroDuration() : kReplayQuiet,
                                     [&](const v1::Event& e) {
                                       // Flushed per line: a follower is often piped to grep.
                                       ctx.out << EventLine(e, tz) << std::flush;
                                     });
  if (!s.ok()) {
    return ctx.Fail(s);
  }
  return 0;
}

}  // namespace kmodd::agentctl

// agentctl events [-f] [--replay]: without -f, the events the agent keeps in memory; with
// -f, new events as they come (after the kept ones with --replay) until interrupted.

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
  auto parsed = ParseArgs(args, {"-f", "--follow", "--replay"}, {});
  if (!parsed.ok()) {
    return ctx.Usage(std::string(parsed.status().message()));
  }
  if (!parsed->positional.empty()) {
    return ctx.Usage("usage: agentctl events [-f] [--replay]");
  }
  const bool follow = parsed->Has("-f") || parsed->Has("--follow");
  const bool replay = !follow || parsed->Has("--replay");
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

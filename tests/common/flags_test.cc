// The one flag parser (common/flags.h): what every command accepts, and how it words what
// it refuses.

#include <catch2/catch.hpp>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/flags.h"

namespace kmodd::flags {
namespace {

// A command with one of each kind of flag, as the tests below parse it.
struct Demo {
  std::string file;
  std::vector<std::string> paths;
  bool insecure = false;
  int count = 1;
  int64_t forget = 600;
  absl::Duration timeout = absl::InfiniteDuration();
  std::string format = "yaml";
  std::map<std::string, std::string> labels;
  std::string metrics = "127.0.0.1:9464";
  std::string ref;
  FlagSet flags{"demo", "usage: demo REF [-f FILE] [--count N]\n"};

  Demo() {
    flags.String("-f,--filename", "FILE", "the input", &file).Needs("a path (a manifest)");
    flags.Strings("--modules", "PATH", "a Module manifest\nor a directory", &paths);
    flags.Switch("--insecure", "plain text", &insecure);
    flags.Int("--count", "N", "how many", &count, {1, 256});
    flags.Int("--forget-after", "SECONDS", "how long", &forget, {0});
    flags.Duration("--timeout", "SECONDS", "until when", &timeout, absl::ZeroDuration(),
                   absl::Seconds(1e8));
    flags.OneOf("-o,--output", "FMT", "", &format, {"yaml", "json", "table"});
    flags.KeyValues("--label", "K=V", "a label", &labels);
    flags.String("--metrics", "ADDR", "\"\" = off", &metrics).AllowEmpty();
    flags.Positional("REF", "an image", &ref).Optional();
  }

  // "" when the line parses, else the error's message.
  std::string Error(const std::vector<std::string>& args) {
    auto r = flags.Parse(args);
    return r.ok() ? "" : std::string(r.status().message());
  }
};

TEST_CASE("flags take --flag value, --flag=value, switches and positionals anywhere") {
  Demo d;
  REQUIRE(d.Error({"-f", "a.yaml", "--modules=m1", "quay.io/x:1", "--modules", "m2",
                   "--insecure", "--count=7", "--forget-after", "0", "--timeout", "1.5",
                   "-o", "json", "--label", "a=b", "--label=c=", "--metrics="}) == "");
  CHECK(d.file == "a.yaml");
  CHECK(d.paths == std::vector<std::string>{"m1", "m2"});
  CHECK(d.insecure);
  CHECK(d.count == 7);
  CHECK(d.forget == 0);
  CHECK(d.timeout == absl::Milliseconds(1500));
  CHECK(d.format == "json");
  CHECK(d.labels == std::map<std::string, std::string>{{"a", "b"}, {"c", ""}});
  CHECK(d.metrics.empty());
  CHECK(d.ref == "quay.io/x:1");
}

TEST_CASE("flags leave defaults alone and take durations with units") {
  Demo d;
  REQUIRE(d.Error({"--timeout", "250ms"}) == "");
  CHECK(d.timeout == absl::Milliseconds(250));
  CHECK(d.count == 1);
  CHECK(d.format == "yaml");
  CHECK(d.ref.empty());
}

TEST_CASE("flags refuse hostile command lines, naming the flag and what it wants") {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      // a missing value says what the flag needs, never "unexpected argument"
      {{"-f"}, "-f needs a path (a manifest)"},
      {{"--count"}, "--count needs a whole number (N)"},
      {{"--modules"}, "--modules needs a value (PATH)"},
      {{"-o"}, "-o needs one of yaml, json or table"},
      // a value that looks like a flag is the next flag, not a value
      {{"-f", "--count", "3"}, "-f needs a path (a manifest); \"--count\" is a flag (write "
                               "-f=--count for a value that starts with -)"},
      {{"--label", "-x"}, "--label needs a KEY=VALUE pair (K=V)"},
      // a flag given twice, unless it collects values
      {{"-f", "a", "--filename", "b"}, "--filename is given more than once; give it once"},
      {{"--insecure", "--insecure"}, "--insecure is given more than once"},
      {{"--count", "1", "--count=2"}, "--count is given more than once"},
      // empty values, unless the flag says "" means something
      {{"-f", ""}, "-f is empty; it needs a path (a manifest)"},
      {{"--filename="}, "--filename is empty"},
      {{"--modules", ""}, "--modules is empty"},
      // numbers: the flag, the value and the range
      {{"--count", "0"}, "--count \"0\": want a whole number from 1 to 256"},
      {{"--count", "-1"}, "--count \"-1\": want a whole number from 1 to 256"},
      {{"--count", "257"}, "--count \"257\": want a whole number from 1 to 256"},
      {{"--count", "99999999999999999999"}, "--count \"99999999999999999999\": want a whole"},
      {{"--count", "1e3"}, "--count \"1e3\": want a whole number from 1 to 256"},
      {{"--count", "0x10"}, "--count \"0x10\""},
      {{"--count=abc"}, "--count=\"abc\": want a whole number from 1 to 256"},
      {{"--forget-after", "-5"}, "--forget-after \"-5\": want a whole number of at least 0"},
      {{"--timeout", "-1"}, "--timeout \"-1\": want a duration from 0 to"},
      {{"--timeout", "nan"}, "--timeout \"nan\""},
      {{"--timeout", "inf"}, "--timeout \"inf\""},
      {{"--timeout", "1e9"}, "--timeout \"1e9\""},
      // choices and pairs
      {{"-o", "xml"}, "-o \"xml\": want yaml, json or table"},
      {{"--label", "novalue"}, "--label \"novalue\": want KEY=VALUE"},
      {{"--label", "=v"}, "--label \"=v\": want KEY=VALUE"},
      // a switch takes no value
      {{"--insecure=true"}, "--insecure is a switch and takes no value"},
      // unknown flags are named, with the closest known one and where to look
      {{"--cuont", "3"}, "unknown flag --cuont (did you mean --count?); `demo --help` lists"},
      {{"--frobnicate"}, "unknown flag --frobnicate; `demo --help` lists the flags"},
      {{"-x"}, "unknown flag -x"},
      // one positional declared: a second is unexpected, even after --
      {{"a", "b"}, "unexpected argument \"b\"; `demo --help` says what it takes"},
      {{"--", "a", "--count"}, "unexpected argument \"--count\""},
  };
  for (const Case& c : cases) {
    INFO(absl::StrJoin(c.args, " "));
    Demo d;
    CHECK_THAT(d.Error(c.args), Catch::Contains(c.says));
  }
}

TEST_CASE("after -- every argument is positional, even one that looks like a flag") {
  Demo d;
  REQUIRE(d.Error({"--count", "2", "--", "--insecure"}) == "");
  CHECK(d.ref == "--insecure");
  CHECK_FALSE(d.insecure);
}

TEST_CASE("a value that starts with - is passed with =, and - and negative numbers are values") {
  Demo d;
  REQUIRE(d.Error({"-f=--odd", "--metrics", "-"}) == "");
  CHECK(d.file == "--odd");
  CHECK(d.metrics == "-");
  int64_t offset = 0;
  FlagSet f("offset", "usage: offset --by N\n");
  f.Int("--by", "N", "", &offset);
  REQUIRE(f.Parse({"--by", "-3"}).ok());
  CHECK(offset == -3);
}

TEST_CASE("--help and -h ask for help whatever else is on the line") {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--help"}, {"-h"}, {"--count", "9", "--help"}}) {
    Demo d;
    auto r = d.flags.Parse(args);
    REQUIRE(r.ok());
    CHECK(*r == FlagSet::Outcome::kHelp);
  }
}

TEST_CASE("required flags and positionals are named when missing") {
  std::string resource;
  std::string ref;
  FlagSet f("pull", "usage: pull REF --resource NAME\n");
  f.String("--resource", "NAME", "", &resource).Required();
  f.Positional("REF", "", &ref).Needs("an image reference (REF)");
  auto none = f.Parse({"x"});
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message() == "--resource is required; it needs a value (NAME)");
  FlagSet g("pull", "usage: pull REF\n");
  g.Positional("REF", "", &ref).Needs("an image reference (REF)");
  auto missing = g.Parse({});
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(std::string(missing.status().message()),
             Catch::StartsWith("pull needs an image reference (REF)"));
  FlagSet h("status", "usage: status\n");
  auto extra = h.Parse({"x"});
  REQUIRE_FALSE(extra.ok());
  CHECK_THAT(std::string(extra.status().message()),
             Catch::Contains("unexpected argument \"x\": status takes no arguments"));
}

TEST_CASE("enums store the value of the word given") {
  enum class Level { kInfo, kDebug };
  Level level = Level::kInfo;
  FlagSet f("run", "usage: run\n");
  f.Enum("--log-level", "LEVEL", "", &level, {{"info", Level::kInfo}, {"debug", Level::kDebug}});
  REQUIRE(f.Parse({"--log-level", "debug"}).ok());
  CHECK(level == Level::kDebug);
  FlagSet g("run", "usage: run\n");
  g.Enum("--log-level", "LEVEL", "", &level, {{"info", Level::kInfo}, {"debug", Level::kDebug}});
  auto bad = g.Parse({"--log-level", "loud"});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "--log-level \"loud\": want info or debug");
}

TEST_CASE("the first positional can end the flags, for a command line that runs a command") {
  std::string out;
  std::vector<std::string> command;
  FlagSet f("timeit", "usage: timeit [-o FILE] COMMAND [ARG]...\n");
  f.String("-o", "FILE", "", &out);
  f.Rest("COMMAND", "", &command);
  f.StopAtFirstPositional();
  REQUIRE(f.Parse({"-o", "t", "ls", "-o", "--all", ""}).ok());
  CHECK(out == "t");
  CHECK(command == std::vector<std::string>{"ls", "-o", "--all", ""});
}

TEST_CASE("unknown arguments can be passed on, in order, for a subcommand to parse") {
  std::string socket = "/run/s";
  std::vector<std::string> rest;
  FlagSet f("agentctl", "usage: agentctl\n");
  f.String("--socket", "PATH", "", &socket);
  f.PassUnknown(&rest);
  auto r = f.Parse({"load", "-f", "x.yaml", "--socket=/s", "--replay"});
  REQUIRE(r.ok());
  CHECK(*r == FlagSet::Outcome::kRun);
  CHECK(socket == "/s");
  CHECK(rest == std::vector<std::string>{"load", "-f", "x.yaml", "--replay"});
  rest.clear();
  FlagSet g("agentctl", "usage: agentctl\n");
  g.PassUnknown(&rest);
  auto h = g.Parse({"get", "--help"});
  REQUIRE(h.ok());
  CHECK(*h == FlagSet::Outcome::kHelp);
  CHECK(rest == std::vector<std::string>{"get"});
}

TEST_CASE("help lists every flag with its placeholder and help, after the usage") {
  Demo d;
  d.flags.Notes("More words.\n");
  const std::string help = d.flags.Help();
  CHECK_THAT(help, Catch::StartsWith("usage: demo REF [-f FILE] [--count N]\n"));
  CHECK_THAT(help, Catch::Contains("\narguments:\n  REF"));
  CHECK_THAT(help, Catch::Contains("\n  -f, --filename FILE"));
  CHECK_THAT(help, Catch::Contains("a Module manifest\n"));
  CHECK_THAT(help, Catch::Contains("or a directory\n"));
  CHECK_THAT(help, Catch::Contains("  -o, --output FMT"));
  CHECK_THAT(help, Catch::Contains("one of yaml, json or table"));
  CHECK_THAT(help, Catch::Contains("  -h, --help"));
  CHECK_THAT(help, Catch::EndsWith("\nMore words.\n"));
}

TEST_CASE("ParseOrExit prints help to out (0) and errors to err (2)") {
  std::ostringstream out;
  std::ostringstream err;
  Demo d;
  CHECK(d.flags.ParseOrExit({"--help"}, out, err) == 0);
  CHECK_THAT(out.str(), Catch::StartsWith("usage: demo"));
  CHECK(err.str().empty());
  Demo e;
  CHECK(e.flags.ParseOrExit({"--count"}, out, err) == 2);
  CHECK(err.str() == "error: --count needs a whole number (N)\n");
  Demo ok;
  CHECK_FALSE(ok.flags.ParseOrExit({"-f", "x"}, out, err).has_value());
}

}  // namespace
}  // namespace kmodd::flags

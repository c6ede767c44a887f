#pragma once

// The one command-line parser of every kmodd binary. A command declares its flags (names,
// value placeholder, help, typed destination) and positional arguments on a FlagSet; the
// FlagSet parses, writes the destinations, prints --help from the declarations and words
// every error for the person who typed the line: the flag, the value, what it wants.
//
//   FlagSet flags("kmodd-controller validate", "usage: kmodd-controller validate -f PATH\n");
//   flags.Strings("-f,--filename", "PATH", "a Module manifest or a directory", &paths)
//       .Needs("a path (a Module manifest or a directory)").Required();
//   if (std::optional<int> exit = flags.ParseOrExit(args, out, err)) return *exit;
//
// Accepted: "--flag value", "--flag=value" (short names too: "-o json", "-o=json"), switches
// without a value, positional arguments anywhere (or, with StopAtFirstPositional, only
// last), and "--" after which everything is positional. A flag given twice is an error
// unless it collects values (Strings, KeyValues). A value is never empty unless the flag
// says AllowEmpty, and a separate value that looks like a flag ("-f --nodes") is refused
// ("-f=--x" passes one on purpose); "-" and negative numbers are values.

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kmodd::flags {

struct IntRange {
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();
};

// Turns one value into the destination; an error's message says what was wanted ("want
// debug, info, warn or error"): the FlagSet puts the flag and the value in front.
using Setter = std::function<absl::Status(const std::string& value)>;

// One declared flag or positional argument; the modifiers chain.
class Flag {
 public:
  // What a missing value is said to need: "-f needs a path (a Module manifest)". The
  // default comes from the type: "a value (FILE)", "a whole number (N)", ...
  Flag& Needs(std::string what);
  // Absent is an error: "--resource is required".
  Flag& Required();
  // A positional argument that may be left out.
  Flag& Optional();
  // "" is a value ("--metrics ''" turns metrics off); otherwise it is refused.
  Flag& AllowEmpty();
  // The words the value may be: listed by --help, and in the error for any other value.
  Flag& Choices(std::vector<std::string> words);

 private:
  friend class FlagSet;
  std::vector<std::string> names;  // "-f", "--filename"; a positional's placeholder alone
  std::string placeholder;         // "PATH"; empty for a switch
  std::string help;
  std::string needs;
  std::vector<std::string> choices;
  Setter set;                      // null for a switch
  bool* on = nullptr;              // a switch's destination
  bool repeatable = false;
  bool required = false;
  bool allow_empty = false;
  bool positional = false;
  int seen = 0;
};

class FlagSet {
 public:
  // `command` as typed ("kmodd-agent pull"), for messages. `usage`: the synopsis and what
  // the command does, printed first by --help and after usage errors; written by hand,
  // since it shows which flags go together.
  FlagSet(std::string command, std::string usage);
  FlagSet(const FlagSet&) = delete;
  FlagSet& operator=(const FlagSet&) = delete;

  Flag& String(absl::string_view names, std::string placeholder, std::string help,
               std::string* into);
  // Repeatable: every value, in order.
  Flag& Strings(absl::string_view names, std::string placeholder, std::string help,
                std::vector<std::string>* into);
  Flag& Switch(absl::string_view names, std::string help, bool* into);
  Flag& Int(absl::string_view names, std::string placeholder, std::string help, int* into,
            IntRange range = {});
  Flag& Int(absl::string_view names, std::string placeholder, std::string help, int64_t* into,
            IntRange range = {});
  // "1.5" (seconds) or an absl duration ("250ms", "1m30s"), within [min, max].
  Flag& Duration(absl::string_view names, std::string placeholder, std::string help,
                 absl::Duration* into, absl::Duration min, absl::Duration max);
  // One of `choices` ("-o yaml|json|table").
  Flag& OneOf(absl::string_view names, std::string placeholder, std::string help,
              std::string* into, std::vector<std::string> choices);
  // One of the names of `choices`, stored as its value (--log-level into a LogLevel).
  template <typename T>
  Flag& Enum(absl::string_view names, std::string placeholder, std::string help, T* into,
             std::vector<std::pair<std::string, T>> choices) {
    std::vector<std::string> words;
    for (const auto& c : choices) {
      words.push_back(c.first);
    }
    return Custom(names, std::move(placeholder), std::move(help),
                  [into, choices = std::move(choices)](const std::string& v) {
                    for (const auto& [word, value] : choices) {
                      if (word == v) {
                        *into = value;
                        return absl::OkStatus();
                      }
                    }
                    return absl::InvalidArgumentError("");  // worded by the FlagSet
                  })
        .Choices(std::move(words));
  }
  // Repeatable KEY=VALUE (a later value for a key replaces the earlier one).
  Flag& KeyValues(absl::string_view names, std::string placeholder, std::string help,
                  std::map<std::string, std::string>* into);
  // Any other value: `set` checks and stores it.
  Flag& Custom(absl::string_view names, std::string placeholder, std::string help, Setter set);

  // Positional arguments, in the order declared; required unless Optional().
  Flag& Positional(std::string placeholder, std::string help, std::string* into);
  // Every positional argument left after the declared ones.
  Flag& Rest(std::string placeholder, std::string help, std::vector<std::string>* into);

  // The first positional argument ends the flags: it and all after it are positional
  // (`timeit -o FILE cmd --its-flag`).
  FlagSet& StopAtFirstPositional();
  // Arguments this set does not know go to `rest`, in order (a command's own flags after
  // agentctl's global ones); a known flag's value is still taken wherever it stands.
  FlagSet& PassUnknown(std::vector<std::string>* rest);
  // Printed by --help after the list of flags.
  FlagSet& Notes(std::string text);

  enum class Outcome { kRun, kHelp };
  // kHelp when -h or --help was given (nothing else is checked then). InvalidArgument for a
  // line that does not parse, saying what to write instead.
  [[nodiscard]] absl::StatusOr<Outcome> Parse(const std::vector<std::string>& args);
  // Parse for a command's entry point: the exit code when the command should end now (help
  // printed to `out`: 0; error printed to `err`: 2), nullopt to run.
  [[nodiscard]] std::optional<int> ParseOrExit(const std::vector<std::string>& args,
                                               std::ostream& out, std::ostream& err);
  // For a usage error found after parsing (flags that do not go together): prints
  // "error: <message>" and the usage to `err`, returns 2.
  int UsageError(std::ostream& err, absl::string_view message) const;

  // The usage, the flags and positional arguments with their help, and the notes.
  std::string Help() const;
  const std::string& usage() const { return usage_; }

 private:
  friend class Flag;
  Flag& Declare(absl::string_view names, std::string placeholder, std::string help,
                std::string needs);
  Flag* Find(absl::string_view name);
  std::string Closest(absl::string_view name) const;
  absl::Status Take(Flag& f, absl::string_view name, const std::string& value, bool separate);
  absl::Status Finish();

  std::string command_;
  std::string usage_;
  std::string notes_;
  std::vector<std::unique_ptr<Flag>> flags_;  // stable addresses for the returned Flag&
  std::vector<Flag*> positionals_;
  Flag* rest_ = nullptr;
  std::vector<std::string>* unknown_ = nullptr;
  bool stop_at_positional_ = false;
};

}  // namespace kmodd::flags

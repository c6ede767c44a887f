#include "common/flags.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace kmodd::flags {

namespace {

// The widest "  -f, --flag VALUE" column before help moves to a line of its own.
constexpr size_t kHelpColumn = 30;

// "-5" and "-.5" are values (a negative number), "-" is a value (stdin), "-x" is a flag.
bool LooksLikeFlag(absl::string_view a) {
  if (a.size() < 2 || a[0] != '-') {
    return false;
  }
  const auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  return !(digit(a[1]) || (a[1] == '.' && a.size() > 2 && digit(a[2])));
}

// "a, b or c".
std::string OrList(const std::vector<std::string>& words) {
  if (words.size() < 2) {
    return absl::StrJoin(words, "");
  }
  return absl::StrCat(
      absl::StrJoin(std::vector<std::string>(words.begin(), words.end() - 1), ", "), " or ",
      words.back());
}

std::string WantNumber(IntRange r) {
  constexpr int64_t kLow = std::numeric_limits<int64_t>::min();
  constexpr int64_t kHigh = std::numeric_limits<int64_t>::max();
  if (r.min != kLow && r.max != kHigh) {
    return absl::StrCat("want a whole number from ", r.min, " to ", r.max);
  }
  if (r.min != kLow) {
    return absl::StrCat("want a whole number of at least ", r.min);
  }
  if (r.max != kHigh) {
    return absl::StrCat("want a whole number of at most ", r.max);
  }
  return "want a whole number";
}

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) {
    row[j] = j;
  }
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

Flag& Flag::Needs(std::string what) {
  needs = std::move(what);
  return *this;
}

Flag& Flag::Required() {
  required = true;
  return *this;
}

Flag& Flag::Optional() {
  required = false;
  return *this;
}

Flag& Flag::AllowEmpty() {
  allow_empty = true;
  return *this;
}

Flag& Flag::Choices(std::vector<std::string> words) {
  needs = absl::StrCat("one of ", OrList(words));
  choices = std::move(words);
  return *this;
}

FlagSet::FlagSet(std::string command, std::string usage)
    : command_(std::move(command)), usage_(std::move(usage)) {}

Flag& FlagSet::Declare(absl::string_view names, std::string placeholder, std::string help,
                       std::string needs) {
  auto f = std::make_unique<Flag>();
  for (absl::string_view n : absl::StrSplit(names, ',', absl::SkipWhitespace())) {
    f->names.emplace_back(n);
  }
  f->placeholder = std::move(placeholder);
  f->help = std::move(help);
  f->needs = std::move(needs);
  flags_.push_back(std::move(f));
  return *flags_.back();
}

Flag& FlagSet::String(absl::string_view names, std::string placeholder, std::string help,
                      std::string* into) {
  std::string needs = absl::StrCat("a value (", placeholder, ")");
  Flag& f = Declare(names, std::move(placeholder), std::move(help), std::move(needs));
  f.set = [into](const std::string& v) {
    *into = v;
    return absl::OkStatus();
  };
  return f;
}

Flag& FlagSet::Strings(absl::string_view names, std::string placeholder, std::string help,
                       std::vector<std::string>* into) {
  Flag& f = String(names, std::move(placeholder), std::move(help), nullptr);
  f.repeatable = true;
  f.set = [into](const std::string& v) {
    into->push_back(v);
    return absl::OkStatus();
  };
  return f;
}

Flag& FlagSet::Switch(absl::string_view names, std::string help, bool* into) {
  Flag& f = Declare(names, "", std::move(help), "");
  f.on = into;
  return f;
}

Flag& FlagSet::Int(absl::string_view names, std::string placeholder, std::string help,
                   int64_t* into, IntRange range) {
  std::string needs = absl::StrCat("a whole number (", placeholder, ")");
  Flag& f = Declare(names, std::move(placeholder), std::move(help), std::move(needs));
  f.set = [into, range](const std::string& v) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(v, &n) || n < range.min || n > range.max) {
      return absl::InvalidArgumentError(WantNumber(range));
    }
    *into = n;
    return absl::OkStatus();
  };
  return f;
}

Flag& FlagSet::Int(absl::string_view names, std::string placeholder, std::string help, int* into,
                   IntRange range) {
  range.min = std::max<int64_t>(range.min, std::numeric_limits<int>::min());
  range.max = std::min<int64_t>(range.max, std::numeric_limits<int>::max());
  auto wide = std::make_shared<int64_t>();
  Flag& f = Int(names, std::move(placeholder), std::move(help), wide.get(), range);
  f.set = [set = std::move(f.set), wide, into](const std::string& v) {
    absl::Status s = set(v);
    if (s.ok()) {
      *into = static_cast<int>(*wide);
    }
    return s;
  };
  return f;
}

Flag& FlagSet::Duration(absl::string_view names, std::string placeholder, std::string help,
                        absl::Duration* into, absl::Duration min, absl::Duration max) {
  std::string needs = absl::StrCat("a duration (", placeholder, ": seconds, or like 250ms)");
  Flag& f = Declare(names, std::move(placeholder), std::move(help), std::move(needs));
  f.set = [into, min, max](const std::string& v) {
    double seconds = 0;
    absl::Duration d;
    bool ok = false;
    if (absl::SimpleAtod(v, &seconds)) {
      ok = std::isfinite(seconds) && seconds >= absl::ToDoubleSeconds(min) &&
           seconds <= absl::ToDoubleSeconds(max);
      d = absl::Seconds(seconds);
    } else {
      ok = absl::ParseDuration(v, &d) && d >= min && d <= max;
    }
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("want a duration from ", absl::FormatDuration(min), " to ",
                       absl::FormatDuration(max), " (seconds, or like 250ms or 1m30s)"));
    }
    *into = d;
    return absl::OkStatus();
  };
  return f;
}

Flag& FlagSet::OneOf(absl::string_view names, std::string placeholder, std::string help,
                     std::string* into, std::vector<std::string> choices) {
  Flag& f = String(names, std::move(placeholder), std::move(help), into);
  f.set = [into, choices](const std::string& v) {
    if (std::find(choices.begin(), choices.end(), v) == choices.end()) {
      return absl::InvalidArgumentError("");
    }
    *into = v;
    return absl::OkStatus();
  };
  return f.Choices(std::move(choices));
}

Flag& FlagSet::KeyValues(absl::string_view names, std::string placeholder, std::string help,
                         std::map<std::string, std::string>* into) {
  std::string needs = absl::StrCat("a KEY=VALUE pair (", placeholder, ")");
  Flag& f = Declare(names, std::move(placeholder), std::move(help), std::move(needs));
  f.repeatable = true;
  f.set = [into](const std::string& v) {
    const size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError("want KEY=VALUE, with a KEY");
    }
    (*into)[v.substr(0, eq)] = v.substr(eq + 1);
    return absl::OkStatus();
  };
  return f;
}

Flag& FlagSet::Custom(absl::string_view names, std::string placeholder, std::string help,
                      Setter set) {
  std::string needs = absl::StrCat("a value (", placeholder, ")");
  Flag& f = Declare(names, std::move(placeholder), std::move(help), std::move(needs));
  f.set = std::move(set);
  return f;
}

Flag& FlagSet::Positional(std::string placeholder, std::string help, std::string* into) {
  Flag& f = String("", placeholder, std::move(help), into);
  f.names = {placeholder};
  f.needs = std::move(placeholder);
  f.positional = true;
  f.required = true;
  positionals_.push_back(&f);
  return f;
}

Flag& FlagSet::Rest(std::string placeholder, std::string help, std::vector<std::string>* into) {
  Flag& f = Strings("", placeholder, std::move(help), into);
  f.names = {placeholder};
  f.needs = std::move(placeholder);
  f.positional = true;
  f.allow_empty = true;
  rest_ = &f;
  return f;
}

FlagSet& FlagSet::StopAtFirstPositional() {
  stop_at_positional_ = true;
  return *this;
}

FlagSet& FlagSet::PassUnknown(std::vector<std::string>* rest) {
  unknown_ = rest;
  return *this;
}

FlagSet& FlagSet::Notes(std::string text) {
  notes_ = std::move(text);
  return *this;
}

Flag* FlagSet::Find(absl::string_view name) {
  for (const auto& f : flags_) {
    if (!f->positional && std::find(f->names.begin(), f->names.end(), name) != f->names.end()) {
      return f.get();
    }
  }
  return nullptr;
}

std::string FlagSet::Closest(absl::string_view name) const {
  std::string best;
  if (name.size() < 3) {
    return best;  // "-x": any one-letter flag is as close as another
  }
  size_t best_distance = std::max<size_t>(1, name.size() / 3) + 1;
  for (const auto& f : flags_) {
    if (f->positional) {
      continue;
    }
    for (const auto& n : f->names) {
      if (const size_t d = EditDistance(name, n); d < best_distance) {
        best = n;
        best_distance = d;
      }
    }
  }
  return best;
}

absl::Status FlagSet::Take(Flag& f, absl::string_view name, const std::string& value,
                           bool separate) {
  if (f.seen > 0 && !f.repeatable) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " is given more than once; give it once"));
  }
  if (value.empty() && !f.allow_empty) {
    return absl::InvalidArgumentError(
        f.positional ? absl::StrCat(name, " is empty; give ", f.needs)
                     : absl::StrCat(name, " is empty; it needs ", f.needs));
  }
  ++f.seen;
  if (absl::Status s = f.set(value); !s.ok()) {
    const std::string why =
        f.choices.empty() ? std::string(s.message()) : absl::StrCat("want ", OrList(f.choices));
    return absl::InvalidArgumentError(absl::StrCat(name, separate ? " \"" : "=\"", value,
                                                   "\": ", why));
  }
  return absl::OkStatus();
}

absl::StatusOr<FlagSet::Outcome> FlagSet::Parse(const std::vector<std::string>& args) {
  bool help = false;
  bool only_positional = false;
  size_t next_positional = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (!only_positional && a == "--") {
      only_positional = true;
      if (unknown_ != nullptr) {
        unknown_->insert(unknown_->end(), args.begin() + static_cast<ptrdiff_t>(i), args.end());
        break;
      }
      continue;
    }
    if (only_positional || !LooksLikeFlag(a)) {
      only_positional = only_positional || stop_at_positional_;
      if (next_positional < positionals_.size()) {
        Flag& p = *positionals_[next_positional++];
        if (absl::Status s = Take(p, p.placeholder, a, true); !s.ok()) {
          return s;
        }
      } else if (rest_ != nullptr) {
        (void)Take(*rest_, rest_->placeholder, a, true);  // cannot fail: repeatable, any value
      } else if (unknown_ != nullptr) {
        unknown_->push_back(a);
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "unexpected argument \"", a, "\"",
            positionals_.empty() ? absl::StrCat(": ", command_, " takes no arguments") : "",
            "; `", command_, " --help` says what it takes"));
      }
      continue;
    }
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    Flag* f = Find(name);
    if (f == nullptr && (name == "-h" || name == "--help")) {
      if (unknown_ == nullptr) {
        return Outcome::kHelp;
      }
      help = true;  // the rest still names the command whose help is asked for
      continue;
    }
    if (f == nullptr) {
      if (unknown_ != nullptr) {
        unknown_->push_back(a);
        continue;
      }
      const std::string closest = Closest(name);
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag ", name,
                       closest.empty() ? "" : absl::StrCat(" (did you mean ", closest, "?)"),
                       "; `", command_, " --help` lists the flags"));
    }
    if (f->on != nullptr) {
      if (eq != std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, " is a switch and takes no value; write ", name, " alone"));
      }
      if (f->seen > 0 && !f->repeatable) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, " is given more than once; give it once"));
      }
      ++f->seen;
      *f->on = true;
      continue;
    }
    if (eq != std::string::npos) {
      if (absl::Status s = Take(*f, name, a.substr(eq + 1), false); !s.ok()) {
        return s;
      }
      continue;
    }
    if (i + 1 == args.size() || LooksLikeFlag(args[i + 1])) {
      std::string hint;
      if (i + 1 < args.size()) {
        hint = absl::StrCat("; \"", args[i + 1], "\" is a flag (write ", name, "=", args[i + 1],
                            " for a value that starts with -)");
      }
      return absl::InvalidArgumentError(absl::StrCat(name, " needs ", f->needs, hint));
    }
    if (absl::Status s = Take(*f, name, args[++i], true); !s.ok()) {
      return s;
    }
  }
  if (help) {
    return Outcome::kHelp;
  }
  if (absl::Status s = Finish(); !s.ok()) {
    return s;
  }
  return Outcome::kRun;
}

absl::Status FlagSet::Finish() {
  for (const auto& f : flags_) {
    if (!f->required || f->seen > 0) {
      continue;
    }
    if (f->positional) {
      return absl::InvalidArgumentError(absl::StrCat(command_, " needs ", f->needs, "; `",
                                                     command_, " --help` says what it takes"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(f->names.front(), " is required; it needs ", f->needs));
  }
  return absl::OkStatus();
}

std::optional<int> FlagSet::ParseOrExit(const std::vector<std::string>& args, std::ostream& out,
                                        std::ostream& err) {
  absl::StatusOr<Outcome> outcome = Parse(args);
  if (!outcome.ok()) {
    err << "error: " << outcome.status().message() << "\n";
    return 2;
  }
  if (*outcome == Outcome::kHelp) {
    out << Help();
    return 0;
  }
  return std::nullopt;
}

int FlagSet::UsageError(std::ostream& err, absl::string_view message) const {
  err << "error: " << message << "\n" << usage_;
  return 2;
}

std::string FlagSet::Help() const {
  struct Row {
    std::string left;
    std::string help;
  };
  std::vector<Row> arguments;
  std::vector<Row> flags;
  for (const auto& f : flags_) {
    if (f->positional) {
      if (!f->help.empty()) {
        arguments.push_back({absl::StrCat("  ", f->placeholder), f->help});
      }
      continue;
    }
    std::string left = absl::StrCat("  ", absl::StrJoin(f->names, ", "));
    if (!f->placeholder.empty()) {
      absl::StrAppend(&left, " ", f->placeholder);
    }
    std::string help = f->help;
    if (!f->choices.empty() && help.empty()) {
      help = absl::StrCat("one of ", OrList(f->choices));
    }
    flags.push_back({std::move(left), std::move(help)});
  }
  flags.push_back({"  -h, --help", "print this help"});
  size_t column = 0;
  for (const auto* rows : {&arguments, &flags}) {
    for (const auto& r : *rows) {
      if (r.left.size() + 2 <= kHelpColumn) {
        column = std::max(column, r.left.size() + 2);
      }
    }
  }
  std::string out = usage_;
  auto section = [&](const char* title, const std::vector<Row>& rows) {
    if (rows.empty()) {
      return;
    }
    absl::StrAppend(&out, "\n", title, ":\n");
    for (const auto& r : rows) {
      out += r.left;
      bool first = true;
      for (absl::string_view line : absl::StrSplit(r.help, '\n')) {
        if (first && r.left.size() + 2 <= column) {
          out.append(column - r.left.size(), ' ');
        } else {
          absl::StrAppend(&out, "\n", std::string(column, ' '));
        }
        absl::StrAppend(&out, line);
        first = false;
      }
      out += "\n";
    }
  };
  section("arguments", arguments);
  section("flags", flags);
  if (!notes_.empty()) {
    absl::StrAppend(&out, "\n", notes_);
  }
  return out;
}

}  // namespace kmodd::flags

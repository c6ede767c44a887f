// What of a node's report the controller keeps: the checks at the gRPC edge (wire.h) and
// the pure filter and merge (report_filter.h).

#include "controller/server/report_filter.h"

#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "controller/server/wire.h"
#include "kmodd/v1/sync.pb.h"

using kmodd::api::Phase;
using kmodd::server::CheckNodeInfo;
using kmodd::server::FilteredReport;
using kmodd::server::FilterReport;
using kmodd::server::PhaseChanges;
using kmodd::server::ReportedFromProto;
using kmodd::server::ReportedModule;
using kmodd::server::ReportLimits;
using kmodd::server::ReportScope;
using kmodd::server::Truncated;

namespace {

std::vector<ReportedModule> Reported(const std::vector<std::string>& keys,
                                     Phase phase = Phase::kLoaded) {
  std::vector<ReportedModule> out;
  for (const auto& k : keys) {
    out.push_back(ReportedModule{k, phase, "", "", "", 0});
  }
  return out;
}

std::vector<std::string> Keys(const std::vector<ReportedModule>& modules) {
  std::vector<std::string> out;
  for (const auto& m : modules) {
    out.push_back(m.key);
  }
  return out;
}

google::protobuf::RepeatedPtrField<kmodd::v1::ModuleStatus> Entries(
    const std::vector<std::pair<std::string, std::string>>& names) {
  google::protobuf::RepeatedPtrField<kmodd::v1::ModuleStatus> out;
  for (const auto& [ns, name] : names) {
    auto* m = out.Add();
    m->set_namespace_(ns);
    m->set_name(name);
    m->set_phase(kmodd::v1::LOADED);
  }
  return out;
}

}  // namespace

TEST_CASE("a report keeps the modules sent to the node, last reported, planned or inherited") {
  const std::set<std::string> sent = {"ns/sent"};
  const std::vector<ReportedModule> last = Reported({"ns/last"}, Phase::kUnloading);
  const std::set<std::string> inherited = {"ns/inherited"};
  int planned_calls = 0;
  ReportScope scope{&sent, &last, &inherited, [&] {
                      ++planned_calls;
                      return std::vector<std::string>{"ns/planned"};
                    }};
  const FilteredReport f = FilterReport(
      Reported({"ns/foreign", "ns/ghost", "ns/inherited", "ns/last", "ns/planned", "ns/sent"}),
      scope);
  CHECK(Keys(f.accepted) ==
        std::vector<std::string>{"ns/inherited", "ns/last", "ns/planned", "ns/sent"});
  CHECK(f.ignored == 2);
  CHECK(f.examples == std::vector<std::string>{"ns/foreign", "ns/ghost"});
  CHECK(planned_calls == 1);  // one plan look-up per report, however many entries miss

  // Every entry admitted without it: the plan is not looked up at all.
  planned_calls = 0;
  CHECK(FilterReport(Reported({"ns/last", "ns/sent"}), scope).accepted.size() == 2);
  CHECK(planned_calls == 0);
}

TEST_CASE("a report with nothing known of the node keeps nothing, and names a few it ignored") {
  std::vector<std::string> keys;
  for (int i = 0; i < 10; ++i) {
    keys.push_back(absl::StrCat("ns/m", i));
  }
  const FilteredReport f = FilterReport(Reported(keys), ReportScope{});
  CHECK(f.accepted.empty());
  CHECK(f.ignored == 10);
  CHECK(f.examples == std::vector<std::string>{"ns/m0", "ns/m1", "ns/m2"});
}

TEST_CASE("phase changes between two sorted reports, Gone for a module no longer listed") {
  std::vector<ReportedModule> before = Reported({"ns/a", "ns/b", "ns/d"});
  before[1].phase = Phase::kLoading;
  std::vector<ReportedModule> after = Reported({"ns/b", "ns/c", "ns/d", "ns/e"});
  std::vector<std::string> got;
  for (const auto& c : PhaseChanges(before, after)) {
    got.push_back(std::string(c.key) + "=" + std::string(c.phase));
  }
  CHECK(got == std::vector<std::string>{"ns/a=Gone", "ns/b=Loaded", "ns/c=Loaded", "ns/e=Loaded"});
  CHECK(PhaseChanges(after, after).empty());
  CHECK(PhaseChanges({}, {}).empty());

  // The same phase from another image or version is a change too (an upgrade's timeline).
  std::vector<ReportedModule> next = after;
  next[0].image = "r/b:2";
  next[1].version = "v2";
  got.clear();
  for (const auto& c : PhaseChanges(after, next)) {
    got.push_back(std::string(c.key) + "=" + std::string(c.phase) + " " + std::string(c.version) +
                  " " + std::string(c.image));
  }
  CHECK(got == std::vector<std::string>{"ns/b=Loaded  r/b:2", "ns/c=Loaded v2 "});
}

TEST_CASE("a report of more modules than the cap is refused whole, naming the cap") {
  ReportLimits limits;
  limits.max_modules = 3;
  std::vector<std::pair<std::string, std::string>> names;
  for (int i = 0; i < 4; ++i) {
    names.emplace_back("ns", absl::StrCat("m", i));
  }
  auto r = ReportedFromProto(Entries(names), limits);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(std::string(r.status().message()) ==
        "the report lists 4 modules, more than the 3 a node may report; report refused and "
        "stream ended");
  names.pop_back();
  CHECK(ReportedFromProto(Entries(names), limits).ok());
  CHECK(ReportLimits{}.max_modules == 4096);
}

TEST_CASE("report entries whose names no Module can have, and repeats, are left out and counted") {
  const std::string long_name(254, 'a');
  auto r = ReportedFromProto(Entries({{"ns", "b"},
                                      {"ns", "a"},
                                      {"ns", "a"},  // a repeat: the first one listed stays
                                      {"NS", "c"},
                                      {"ns", long_name},
                                      {std::string(64, 'n'), "d"},
                                      {"ns", ""},
                                      {"ns", "x/y"},
                                      {"ns", std::string(253, 'z')}}),
                             ReportLimits{});
  REQUIRE(r.ok());
  CHECK(Keys(r->modules) == std::vector<std::string>{"ns/a", "ns/b", "ns/" + std::string(253, 'z')});
  CHECK(r->bad_names == 5);
  CHECK(r->repeated == 1);
  CHECK(r->first_bad_name == "NS/c");
}

TEST_CASE("report texts over 1 KiB are cut with a marker, never inside a UTF-8 character") {
  CHECK(Truncated("short", 1024) == "short");
  CHECK(Truncated(std::string(1024, 'x'), 1024) == std::string(1024, 'x'));
  CHECK(Truncated(std::string(5000, 'x'), 1024) ==
        std::string(1024, 'x') + "... [truncated, 5000 bytes in all]");
  // "é" is two bytes: a cut after its first byte would leave half of it.
  const std::string accents = std::string(1023, 'x') + "\xc3\xa9" + "tail";
  CHECK(Truncated(accents, 1024) == std::string(1023, 'x') + "... [truncated, 1029 bytes in all]");

  google::protobuf::RepeatedPtrField<kmodd::v1::ModuleStatus> entries = Entries({{"ns", "a"}});
  entries[0].set_message(std::string(1 << 20, 'm'));
  entries[0].set_version(std::string(2000, 'v'));
  auto r = ReportedFromProto(entries, ReportLimits{});
  REQUIRE(r.ok());
  CHECK(r->modules[0].message.size() < 1100);
  CHECK(r->modules[0].message.find("[truncated, 1048576 bytes in all]") != std::string::npos);
  CHECK(r->modules[0].version.find("[truncated, 2000 bytes in all]") != std::string::npos);
}

TEST_CASE("a hello with a node name or labels over the limits is refused, naming the field") {
  kmodd::v1::NodeInfo info;
  info.set_name("w1");
  (*info.mutable_labels())["role"] = "worker";
  CHECK(CheckNodeInfo(info, ReportLimits{}).ok());

  kmodd::v1::NodeInfo long_name = info;
  long_name.set_name(std::string(254, 'w'));
  absl::Status st = CheckNodeInfo(long_name, ReportLimits{});
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(st.message()).find("node.name has 254 bytes") == 0);

  kmodd::v1::NodeInfo many = info;
  for (int i = 0; i < 1024; ++i) {
    (*many.mutable_labels())[absl::StrCat("l", i)] = "v";
  }
  st = CheckNodeInfo(many, ReportLimits{});
  CHECK(st.code() == absl::StatusCode::kResourceExhausted);
  CHECK(std::string(st.message()).find("node.labels has 1025 labels, more than the 1024") == 0);

  kmodd::v1::NodeInfo long_value = info;
  (*long_value.mutable_labels())["role"] = std::string(1025, 'v');
  st = CheckNodeInfo(long_value, ReportLimits{});
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(st.message()).find("node.labels[\"role\"]") == 0);
}

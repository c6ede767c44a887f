// The journal's decoder on corrupt files: the strict JSON parser and a type check per field,
// so a damaged journal is a DataLoss error naming the field and what to do, never an
// exception out of the agent's start.

#include <catch2/catch.hpp>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "node-agent/reconcile/journal.h"

using kmodd::reconcile::DecodeJournal;
using kmodd::reconcile::EncodeJournal;
using kmodd::reconcile::Journal;
using kmodd::reconcile::JournalEntry;
using kmodd::api::Phase;

TEST_CASE("a journal survives its own encoding") {
  Journal j;
  j.boot_id = "boot-1";
  JournalEntry e;
  e.fingerprint = "fp";
  e.source = "reg/drv@sha256:00";
  e.tree = "/var/lib/kmodd/images/t";
  e.phase = Phase::kLoaded;
  e.loaded = {"kmm_ci_a", "dummy"};
  e.firmware = {"kmm_ci_fw/fw.bin"};
  e.message = "ok \"quoted\" \xc3\xa9";
  j.modules["ns/m"] = e;
  j.in_tree_removed.push_back({"dummy", "dummy", "ns/m"});
  auto back = DecodeJournal(EncodeJournal(j), "journal.json");
  REQUIRE(back.ok());
  CHECK(*back == j);
}

TEST_CASE("a journal keeps the phase names it has always written") {
  // Journals on nodes outlive agent versions: these spellings are its format.
  const std::pair<Phase, const char*> rows[] = {{Phase::kLoading, "Loading"},
                                                {Phase::kLoaded, "Loaded"},
                                                {Phase::kUnloading, "Unloading"},
                                                {Phase::kFailed, "Failed"}};
  for (const auto& [phase, name] : rows) {
    INFO(name);
    Journal j;
    j.boot_id = "b";
    j.modules["ns/m"].phase = phase;
    const std::string text = EncodeJournal(j);
    CHECK(text.find(absl::StrCat("\"", name, "\"")) != std::string::npos);
    const std::string written = absl::StrCat(
        R"({"version": 1, "bootId": "b", "modules": {"ns/m": {"phase": ")", name, R"("}}})");
    absl::StatusOr<Journal> back = DecodeJournal(written, "journal.json");
    REQUIRE(back.ok());
    CHECK(back->modules.at("ns/m").phase == phase);
  }
}

TEST_CASE("a corrupt journal is an error naming the field, never an exception") {
  struct Case {
    const char* name;
    std::string text;
    const char* wanted;  // in the message
  };
  const std::string head = R"({"version": 1, "bootId": "b", )";
  const Case cases[] = {
      {"empty file", "", "corrupt journal"},
      {"truncated", head + R"("modules": {"ns/m": {"phase": "Lo)", "corrupt journal"},
      {"not JSON", "version: 1\nmodules: {}\n", "corrupt journal"},
      {"a list", "[1, 2]", "not a kmodd journal"},
      {"no version", R"({"modules": {}})", "not a kmodd journal"},
      {"version as a string", R"({"version": "1"})", "not a kmodd journal"},
      {"another version", R"({"version": 2})", "not a kmodd journal"},
      {"a float", R"({"version": 1.0})", "corrupt journal"},
      {"bootId not a string", R"({"version": 1, "bootId": 7})", "bootId is not a string"},
      {"modules a list", head + R"("modules": []})", "modules is not an object"},
      {"an entry a string", head + R"("modules": {"ns/m": "Loaded"}})", "module ns/m: not an object"},
      {"phase a number", head + R"("modules": {"ns/m": {"phase": 1}}})",
       "module ns/m: phase is not a string"},
      {"unknown phase", head + R"("modules": {"ns/m": {"phase": "Exploded"}}})", "unknown phase"},
      {"a phase of the status, not the journal's",
       head + R"("modules": {"ns/m": {"phase": "Pulling"}}})", "unknown phase"},
      {"the wire's spelling", head + R"("modules": {"ns/m": {"phase": "LOADED"}}})",
       "unknown phase"},
      {"loaded not a list", head + R"("modules": {"ns/m": {"phase": "Loaded", "loaded": "a"}}})",
       "module ns/m: loaded is not a list"},
      {"loaded holds a number",
       head + R"("modules": {"ns/m": {"phase": "Loaded", "loaded": ["a", 3]}}})",
       "module ns/m: loaded holds a non-string"},
      {"firmware holds an object",
       head + R"("modules": {"ns/m": {"phase": "Loaded", "firmware": [{}]}}})",
       "module ns/m: firmware holds a non-string"},
      {"inTreeRemoved an object", head + R"("inTreeRemoved": {}})", "inTreeRemoved is not a list"},
      {"inTreeRemoved holds a string", head + R"("inTreeRemoved": ["dummy"]})",
       "inTreeRemoved holds a non-object"},
      {"removal module a number", head + R"("inTreeRemoved": [{"module": 1}]})",
       "inTreeRemoved[].module is not a string"},
      {"deep nesting", std::string(100000, '[') + std::string(100000, ']'), "corrupt journal"},
      {"invalid UTF-8", head + "\"modules\": {\"ns/\xff\": {}}}", "corrupt journal"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    absl::StatusOr<Journal> j = DecodeJournal(c.text, "/var/lib/kmodd/journal.json");
    REQUIRE_FALSE(j.ok());
    CHECK(j.status().code() == absl::StatusCode::kDataLoss);
    const std::string msg(j.status().message());
    CHECK(msg.find("/var/lib/kmodd/journal.json") != std::string::npos);
    CHECK(msg.find(c.wanted) != std::string::npos);
  }
}

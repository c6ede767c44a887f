#include "api/phase.h"

#include <catch2/catch.hpp>

#include <set>
#include <string>

using kmodd::api::kAgentPhases;
using kmodd::api::ParsePhase;
using kmodd::api::Phase;
using kmodd::api::PhaseName;

TEST_CASE("every phase has one name, which parses back to it") {
  std::set<std::string> names;
  for (Phase p : {Phase::kUnknown, Phase::kPending, Phase::kPulling, Phase::kLoading,
                  Phase::kLoaded, Phase::kUnloading, Phase::kFailed}) {
    const std::string name(PhaseName(p));
    INFO(name);
    CHECK(names.insert(name).second);
    CHECK(ParsePhase(name) == p);
  }
  CHECK(names == std::set<std::string>{"Unknown", "Pending", "Pulling", "Loading", "Loaded",
                                       "Unloading", "Failed"});
}

TEST_CASE("the phases an agent reports are every phase but Unknown, in lifecycle order") {
  std::string names;
  for (Phase p : kAgentPhases) {
    names += std::string(PhaseName(p)) + " ";
  }
  CHECK(names == "Pending Pulling Loading Available Loaded Unloading Failed ");
}

TEST_CASE("a phase name parses only as spelled") {
  CHECK(ParsePhase("loaded") == std::nullopt);
  CHECK(ParsePhase("LOADED") == std::nullopt);
  CHECK(ParsePhase("") == std::nullopt);
  CHECK(ParsePhase("Skipped") == std::nullopt);
  CHECK(ParsePhase("Loaded ") == std::nullopt);
}

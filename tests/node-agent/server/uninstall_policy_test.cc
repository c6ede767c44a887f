// The uninstall policy (node-agent/server/uninstall_policy.h) on real files in a temp dir:
// when the agent, stopping, removes its state.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>

#include "common/file.h"
#include "kmodd/v1/sync.pb.h"
#include "node-agent/reconcile/journal.h"
#include "node-agent/server/uninstall_policy.h"
#include "proto/convert.h"
#include "server_rig.h"

namespace fs = std::filesystem;
using kmodd::agent::UninstallPolicy;

namespace {

struct StateDir {
  kmodd::testing::TempDir tmp{"server"};
  std::string state = tmp.path + "/state";
  std::string socket = tmp.path + "/run/kmodd/agent.sock";
  std::FILE* devnull = std::fopen("/dev/null", "w");
  kmodd::Logger log{devnull};

  StateDir() { fs::create_directories(state); }
  ~StateDir() { std::fclose(devnull); }

  void Desired(const std::vector<kmodd::api::NodeModuleSpec>& modules) {
    kmodd::v1::NodeDesired d;
    d.set_version("v9");
    for (const auto& m : modules) {
      *d.add_modules() = kmodd::proto::ToProto(m);
    }
    REQUIRE(kmodd::WriteFileAtomic(state + "/desired.pb", d.SerializeAsString()).ok());
  }
  void Journal(const kmodd::reconcile::Journal& j) {
    REQUIRE(kmodd::reconcile::SaveJournal(state + "/journal.json", j).ok());
  }
};

}  // namespace

TEST_CASE("the agent removes its state at stop only when nothing is desired and nothing loaded",
          "[server][uninstall]") {
  struct Row {
    const char* what;
    std::function<void(StateDir&)> given;
    bool removed;
    const char* why;  // a part of Decide's reason
  };
  const auto module = kmodd::testing::Spec("ns", "a", "r/a:1", "mod_a");
  const std::vector<Row> rows = {
      {"no desired state ever received", [](StateDir&) {}, false, "no desired state received"},
      {"an unreadable desired state",
       [](StateDir& s) { std::ofstream(s.state + "/desired.pb") << "\xff\xff not a message"; },
       false, "unreadable"},
      {"the last desired state has Modules", [&](StateDir& s) { s.Desired({module}); }, false,
       "has Modules"},
      {"no Modules desired, but the journal records one",
       [](StateDir& s) {
         s.Desired({});
         kmodd::reconcile::Journal j;
         j.modules["ns/a"].loaded = {"mod_a"};
         s.Journal(j);
       },
       false, "journal records Modules"},
      {"no Modules desired, but an in-tree module is owed back",
       [](StateDir& s) {
         s.Desired({});
         kmodd::reconcile::Journal j;
         j.in_tree_removed = {{"i915", "i915", "ns/a"}};
         s.Journal(j);
       },
       false, "owed back"},
      {"no Modules desired, the journal unreadable",
       [](StateDir& s) {
         s.Desired({});
         std::ofstream(s.state + "/journal.json") << "{not json";
       },
       false, "journal is unreadable"},
      {"no Modules desired and an empty journal",
       [](StateDir& s) {
         s.Desired({});
         s.Journal({});
       },
       true, "nothing desired and nothing loaded"},
      {"no Modules desired and no journal yet", [](StateDir& s) { s.Desired({}); }, true,
       "nothing desired and nothing loaded"},
  };
  for (const auto& row : rows) {
    SECTION(row.what) {
      StateDir s;
      row.given(s);
      const UninstallPolicy policy(s.state, s.socket, s.log);
      const UninstallPolicy::Decision d = policy.Decide();
      CHECK(d.remove == row.removed);
      CHECK_THAT(d.why, Catch::Contains(row.why));
      const auto done = policy.AtStop();
      CHECK(done.has_value() == row.removed);
      CHECK(fs::exists(s.state) == !row.removed);
      if (done) {
        CHECK(done->left.empty());
        CHECK(std::find(done->removed.begin(), done->removed.end(), s.state) != done->removed.end());
      }
    }
  }
}

TEST_CASE("a persisted desired state is read back as the journal's source", "[server][uninstall]") {
  StateDir s;
  s.Desired({kmodd::testing::Spec("ns", "a", "r/a:1", "mod_a")});
  const auto d = kmodd::agent::LoadPersistedDesired(s.state + "/desired.pb", s.log);
  REQUIRE(d.has_value());
  CHECK(d->version == "v9");
  CHECK(d->source == "journal");
  REQUIRE(d->modules.size() == 1);
  CHECK(d->modules[0].Key() == "ns/a");
  CHECK_FALSE(kmodd::agent::LoadPersistedDesired(s.state + "/missing.pb", s.log));
}

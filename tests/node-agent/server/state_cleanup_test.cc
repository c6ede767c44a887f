#include "node-agent/server/state_cleanup.h"

#include <catch2/catch.hpp>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/temp_dir.h"

namespace fs = std::filesystem;
using kmodd::agent::RemoveAgentState;
using kmodd::testing::TempDir;

namespace {

void Touch(const std::string& path) { std::ofstream(path) << "x"; }

// A bound unix socket file, as the agent's local service leaves while it runs.
void MakeSocket(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
  ::close(fd);
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

TEST_CASE("agent state cleanup removes what the agent writes, the directory and the socket") {
  TempDir t{"cleanup"};
  const std::string state = t.path + "/state";
  fs::create_directories(state + "/images/blobs");
  fs::create_directories(state + "/firmware/kmm_ci_fw");
  for (const char* f : {"journal.json", "desired.pb", "firmware-ledger.json",
                        "firmware-ledger.json.lock", "journal.json.tmp-AbC123"}) {
    Touch(state + "/" + f);
  }
  fs::create_directories(t.path + "/kmodd");
  MakeSocket(t.path + "/kmodd/agent.sock");

  const auto done = RemoveAgentState(state, t.path + "/kmodd/agent.sock");
  CHECK(done.left.empty());
  CHECK(Has(done.removed, state + "/images"));
  CHECK(Has(done.removed, state + "/journal.json.tmp-AbC123"));
  CHECK(Has(done.removed, state));
  CHECK(Has(done.removed, t.path + "/kmodd/agent.sock"));
  CHECK(Has(done.removed, t.path + "/kmodd"));
  CHECK_FALSE(fs::exists(state));
  CHECK_FALSE(fs::exists(t.path + "/kmodd"));
  CHECK(fs::exists(t.path));  // the parents stay

  // Nothing there any more: nothing to do, no error.
  const auto again = RemoveAgentState(state, t.path + "/kmodd/agent.sock");
  CHECK(again.removed.empty());
  CHECK(again.left.empty());
}

TEST_CASE("agent state cleanup keeps what it did not write, and the directory holding it") {
  TempDir t{"cleanup"};
  const std::string state = t.path + "/state";
  fs::create_directories(state);
  Touch(state + "/journal.json");
  Touch(state + "/notes.txt");  // someone else's (or a mistyped --state-dir)
  fs::create_directories(t.path + "/sockets");
  MakeSocket(t.path + "/sockets/agent.sock");

  const auto done = RemoveAgentState(state, t.path + "/sockets/agent.sock");
  CHECK(Has(done.removed, state + "/journal.json"));
  REQUIRE(done.left.size() == 1);
  CHECK(done.left[0] == state + "/notes.txt: not written by kmodd, left");
  CHECK(fs::exists(state + "/notes.txt"));
  CHECK_FALSE(fs::exists(state + "/journal.json"));
  // The socket goes; a directory not named kmodd stays even when empty.
  CHECK_FALSE(fs::exists(t.path + "/sockets/agent.sock"));
  CHECK(fs::exists(t.path + "/sockets"));
}

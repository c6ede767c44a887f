// kmodd-sync-flood's options (tools/bench/sync_flood_options.h).

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tools/bench/sync_flood_options.h"

namespace kmodd::bench {
namespace {

std::vector<std::string> With(std::vector<std::string> extra) {
  std::vector<std::string> args = {"--controller", "127.0.0.1:1", "--ca", "ca.crt"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The error of parsing `args`, "" if they parse.
std::string ErrorOf(const std::vector<std::string>& args) {
  auto o = ParseSyncFloodOptions(args);
  return o.ok() ? "" : std::string(o.status().message());
}

TEST_CASE("sync flood defaults to one fixed token over 8 connections, 2000 streams open") {
  auto o = ParseSyncFloodOptions(With({}));
  REQUIRE(o.ok());
  CHECK(o->controller == "127.0.0.1:1");
  CHECK(o->ca_file == "ca.crt");
  CHECK(o->duration_s == 20);
  CHECK(o->connections == 8);
  CHECK(o->inflight == 2000);
  CHECK_FALSE(o->distinct_tokens);
  CHECK_FALSE(o->token.empty());
  CHECK(o->node_prefix == "flood-");
}

TEST_CASE("sync flood takes its sizes, a token or distinct tokens") {
  auto o = ParseSyncFloodOptions(With({"--duration", "5", "--connections", "16", "--inflight",
                                       "300", "--distinct-tokens", "--node-prefix", "x-",
                                       "--nodes", "7"}));
  REQUIRE(o.ok());
  CHECK(o->duration_s == 5);
  CHECK(o->connections == 16);
  CHECK(o->inflight == 300);
  CHECK(o->distinct_tokens);
  CHECK(o->node_prefix == "x-");
  CHECK(o->nodes == 7);
  CHECK(ParseSyncFloodOptions(With({"--token", "abc"}))->token == "abc");
}

TEST_CASE("sync flood names the flag of an invalid value") {
  CHECK(ErrorOf(With({"--inflight", "0"})).find("--inflight") != std::string::npos);
  CHECK(ErrorOf(With({"--inflight", "-3"})).find("--inflight") != std::string::npos);
  CHECK(ErrorOf(With({"--connections", "x"})).find("--connections") != std::string::npos);
  CHECK(ErrorOf(With({"--duration", "1.5"})).find("--duration") != std::string::npos);
  CHECK(ErrorOf(With({"--nodes", ""})).find("--nodes") != std::string::npos);
  CHECK(ErrorOf(With({"--token", ""})).find("--token") != std::string::npos);
  CHECK(ErrorOf(With({"--bogus", "1"})).find("--bogus") != std::string::npos);
  CHECK(ErrorOf(With({"--duration"})).find("--duration") != std::string::npos);
}

TEST_CASE("sync flood refuses missing or contradictory options") {
  CHECK(ErrorOf({"--ca", "c"}).find("--controller") != std::string::npos);
  CHECK(ErrorOf({"--controller", "h:1"}).find("--ca") != std::string::npos);
  const std::string both = ErrorOf(With({"--token", "t", "--distinct-tokens"}));
  CHECK(both.find("--token") != std::string::npos);
  CHECK(both.find("--distinct-tokens") != std::string::npos);
}

}  // namespace
}  // namespace kmodd::bench

// common/http's server at Stop: what it answers, what it closes, and that it returns as soon
// as its connections have ended rather than when its grace runs out.

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "common/http/server.h"
#include "tests/common/http/raw_client.h"
#include "tests/common/http/server_rig.h"
#include "tests/eventually.h"

namespace kmodd::http {
namespace {

using std::chrono::seconds;
using kmodd::testing::Eventually;
using kmodd::testing::PostRequest;
using kmodd::testing::RawClient;
using kmodd::testing::TestResponse;
using testing::Echoed;
using testing::Gate;
using testing::HoldRoutes;
using testing::Plain;
using testing::Served;
using testing::Tls;

TEST_CASE("server at Stop answers the request in progress, closes idle ones, takes no more") {
  Gate gate;
  ServerOptions o;
  o.header_timeout = seconds(120);
  o.stop_grace = seconds(60);  // the held request is released well within it
  auto s = std::make_unique<Served>(o, HoldRoutes(gate, [](const ServerRequest&) { return true; }),
                                    Tls::kOff);
  const uint16_t port = s->port();
  RawClient busy = Plain("127.0.0.2");
  RawClient idle = Plain("127.0.0.3");
  REQUIRE(busy.Open(port));
  REQUIRE(idle.Open(port));
  REQUIRE(Echoed(idle));  // kept alive, waiting for its next request
  REQUIRE(busy.Send(PostRequest("{}", "/hold")));
  REQUIRE(gate.WaitHeld(1));

  std::thread stopper([&] { s->server->Stop(); });
  CHECK(idle.ClosedWithin(seconds(30)));  // long before its 120 s header timeout
  RawClient late = Plain("127.0.0.4", seconds(2));
  const bool late_served = late.Open(port) && Echoed(late);
  CHECK_FALSE(late_served);
  gate.Open();
  const std::optional<TestResponse> r = busy.Receive();
  stopper.join();  // before any REQUIRE: a joinable thread must not be destroyed
  REQUIRE(r);
  CHECK(r->body == "released\n");
  CHECK(r->head.find("connection: close") != std::string::npos);
  // Stop returned because the sessions ended, not because its grace ran out.
  CHECK(s->server->stats().connections == 0);
}

TEST_CASE("server at Stop ends a TLS handshake not yet begun instead of waiting for it") {
  ServerOptions o;
  o.header_timeout = seconds(120);
  o.stop_grace = seconds(60);  // far longer than Stop may take
  Served s(o);
  RawClient stalled("127.0.0.2");
  REQUIRE(stalled.Connect(s.port()));  // and no ClientHello
  REQUIRE(Eventually([&] { return s.server->stats().connections == 1; }));
  s.server->Stop();
  // Ended by Stop, not left to its header timeout past the grace.
  CHECK(s.server->stats().connections == 0);
  CHECK(stalled.ClosedWithin(seconds(30)));
}

}  // namespace
}  // namespace kmodd::http

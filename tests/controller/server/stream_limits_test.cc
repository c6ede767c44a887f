#include "controller/server/stream_limits.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "tests/fakes/fake_clock.h"

namespace kmodd::server {
namespace {

TEST_CASE("peer host: the address of a gRPC peer string, hostile ones kept whole") {
  struct Row {
    const char* peer;
    const char* host;
  };
  for (const Row& r : {Row{"ipv4:10.0.0.7:51234", "ipv4:10.0.0.7"},
                       Row{"ipv6:[fd00::1]:443", "ipv6:[fd00::1]"},
                       Row{"ipv6:[::1]:1", "ipv6:[::1]"},
                       Row{"ipv6:fd00::1", "ipv6:fd00::1"},  // no brackets: no port to cut
                       Row{"unix:/run/kmodd.sock", "unix:/run/kmodd.sock"},
                       Row{"ipv4:", "ipv4:"},
                       Row{"", ""},
                       Row{":::", ":::"}}) {
    CAPTURE(r.peer);
    CHECK(PeerHost(r.peer) == r.host);
  }
}

TEST_CASE("peer limiter counts connections per address, and streams on one as one") {
  PeerLimiter limits(2);
  CHECK(limits.Admit("ipv4:10.0.0.7:1"));
  CHECK(limits.Admit("ipv4:10.0.0.7:1"));  // a second stream on the same connection
  CHECK(limits.Admit("ipv4:10.0.0.7:2"));
  CHECK_FALSE(limits.Admit("ipv4:10.0.0.7:3"));
  CHECK(limits.Admit("ipv4:10.0.0.8:3"));  // another address has its own count
  CHECK(limits.connections("ipv4:10.0.0.7") == 2);
  limits.Release("ipv4:10.0.0.7:1");
  CHECK_FALSE(limits.Admit("ipv4:10.0.0.7:3"));  // connection 1 still has a stream
  limits.Release("ipv4:10.0.0.7:1");
  CHECK(limits.Admit("ipv4:10.0.0.7:3"));
  limits.Release("ipv4:10.0.0.9:1");  // never admitted: nothing changes
  CHECK(limits.connections("ipv4:10.0.0.9") == 0);
  PeerLimiter unlimited(0);
  for (int i = 0; i < 1000; ++i) {
    CHECK(unlimited.Admit("ipv4:10.0.0.7:" + std::to_string(i)));
  }
}

// Counts its closes.
class CountingStream final : public AgentStream {
 public:
  void Push(std::shared_ptr<const v1::NodeDesired>) override {}
  void Close(const absl::Status& why) override {
    last = why;
    ++closes;
  }
  std::atomic<int> closes{0};
  absl::Status last;
};

TEST_CASE("stream deadlines close a stream when its token expires, and only then") {
  FakeClock clock;
  CountingStream a, b, forever, removed;
  StreamDeadlines deadlines(clock);
  deadlines.Set(&a, clock.Now() + absl::Minutes(10));
  deadlines.Set(&b, clock.Now() + absl::Minutes(20));
  deadlines.Set(&forever, absl::InfiniteFuture());
  deadlines.Set(&removed, clock.Now() + absl::Minutes(5));
  deadlines.Remove(&removed);
  CHECK(deadlines.size() == 2);
  clock.Advance(absl::Minutes(9));
  REQUIRE(clock.AwaitWaiters(1));
  CHECK(a.closes == 0);
  clock.Advance(absl::Minutes(2));
  // The sweeper closes `a`, drops it and waits again for `b`.
  for (int i = 0; i < 10'000 && deadlines.size() != 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(deadlines.size() == 1);
  CHECK(a.closes == 1);
  CHECK(a.last.code() == absl::StatusCode::kUnauthenticated);
  CHECK(b.closes == 0);
  CHECK(removed.closes == 0);
  CHECK(forever.closes == 0);
}

}  // namespace
}  // namespace kmodd::server

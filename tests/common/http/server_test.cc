// common/http's server against hostile clients: the real server on 127.0.0.1, port 0, with
// a throwaway certificate (or in plain HTTP), and raw clients from several loopback
// addresses.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/http/server.h"
#include "tests/common/http/raw_client.h"
#include "tests/common/http/server_rig.h"
#include "tests/eventually.h"

namespace kmodd::http {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using kmodd::testing::Eventually;
using kmodd::testing::PostRequest;
using kmodd::testing::RawClient;
using kmodd::testing::TestResponse;
using kmodd::testing::Wire;
using testing::EchoRoutes;
using testing::Echoed;
using testing::Gate;
using testing::HoldRoutes;
using testing::Plain;
using testing::Served;
using testing::Tls;

TEST_CASE("server answers a request while another request's handler still runs") {
  Gate gate;
  Served s({}, HoldRoutes(gate, [](const ServerRequest&) { return true; }));
  RawClient held;
  REQUIRE(held.Open(s.port()));
  REQUIRE(held.Send(PostRequest("{}", "/hold")));
  REQUIRE(gate.WaitHeld(1));

  RawClient other("127.0.0.1", seconds(5));
  CHECK(other.Open(s.port()));
  CHECK(Echoed(other));
  CHECK(gate.Held() == 1);  // answered while the first handler was still held
  gate.Open();
  const std::optional<TestResponse> r = held.Receive();
  REQUIRE(r);
  CHECK(r->body == "released\n");
}

TEST_CASE("server answers I/O-thread routes while every worker is busy") {
  Gate gate;
  ServerOptions o;
  o.workers = 1;
  Served s(o, HoldRoutes(gate, [](const ServerRequest&) { return true; }));
  RawClient held;
  REQUIRE(held.Open(s.port()));
  REQUIRE(held.Send(PostRequest("{}", "/hold")));
  REQUIRE(gate.WaitHeld(1));
  RawClient c("127.0.0.1", seconds(5));
  REQUIRE(c.Open(s.port()));
  REQUIRE(c.Send("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::optional<TestResponse> r = c.Receive();
  CHECK((r && r->body == "pong\n"));
  gate.Open();
  CHECK(held.Receive().has_value());
}

// Opens `a` and `b` on `port` and sends each a POST of `body` to /hold.
void PostBoth(uint16_t port, RawClient& a, RawClient& b, const std::string& body) {
  REQUIRE(a.Open(port));
  REQUIRE(b.Open(port));
  REQUIRE(a.Send(PostRequest(body, "/hold")));
  REQUIRE(b.Send(PostRequest(body, "/hold")));
}

TEST_CASE("server keeps a thread for small bodies while large bodies are handled") {
  // Two workers: large bodies (past large_body) may use one of them.
  Gate gate;
  ServerOptions o;
  REQUIRE(o.workers == 2);
  Served s(o, HoldRoutes(gate, [&](const ServerRequest& r) { return r.body.size() > o.large_body; }));
  const std::string large(o.large_body + 1, 'x');
  RawClient a("127.0.0.2");
  RawClient b("127.0.0.2");
  PostBoth(s.port(), a, b, large);
  REQUIRE(gate.WaitHeld(1));

  RawClient small("127.0.0.1", seconds(5));
  CHECK(small.Open(s.port()));
  CHECK(Echoed(small));
  CHECK(gate.Held() == 1);  // the second large one waits for the first, the small one did not
  gate.Open();
  CHECK(a.Receive().has_value());
  CHECK(b.Receive().has_value());
  CHECK(gate.Held() == 2);
}

TEST_CASE("server reads large bodies only within its memory budget") {
  // Three workers, so two large handlers could run at once; the budget holds one body.
  Gate gate;
  ServerOptions o;
  o.workers = 3;
  o.body_memory = o.body_limit;
  Served s(o, HoldRoutes(gate, [&](const ServerRequest& r) { return r.body.size() > o.large_body; }));
  const std::string large(2 << 20, 'x');  // 2 MiB: two don't fit
  RawClient a("127.0.0.2");
  RawClient b("127.0.0.3");
  PostBoth(s.port(), a, b, large);
  REQUIRE(gate.WaitHeld(1));
  RawClient small("127.0.0.1", seconds(5));
  CHECK(small.Open(s.port()));
  CHECK(Echoed(small));  // small bodies need no budget
  std::this_thread::sleep_for(milliseconds(300));  // room for a second start, were it allowed
  gate.Open();
  CHECK(a.Receive().has_value());
  CHECK(b.Receive().has_value());
  std::lock_guard lock(gate.mu);
  CHECK(gate.events == std::vector<std::string>{"start", "end", "start", "end"});
}

TEST_CASE("server answers 500 when a handler throws, on either thread, and serves on") {
  Router routes = EchoRoutes();
  routes.Add("POST", "/throw", RunOn::kWorkers,
             [](const ServerRequest&) -> ServerReply { throw std::runtime_error("boom"); });
  routes.Add("GET", "/throw", RunOn::kIoThread,
             [](const ServerRequest&) -> ServerReply { throw std::runtime_error("bang"); });
  Served s({}, std::move(routes));
  RawClient c;
  REQUIRE(c.Open(s.port()));
  REQUIRE(c.Send(PostRequest("{}", "/throw")));
  std::optional<TestResponse> r = c.Receive();
  REQUIRE(r);
  CHECK(r->status == 500);
  CHECK(Echoed(c));  // the same connection
  REQUIRE(c.Send("GET /throw HTTP/1.1\r\nHost: x\r\n\r\n"));
  r = c.Receive();
  REQUIRE(r);
  CHECK(r->status == 500);
  CHECK(Echoed(c));
  CHECK(s.LogLines("boom") == 1);
  CHECK(s.LogLines("bang") == 1);
}

TEST_CASE("server routes by method and path over the wire") {
  Served s({}, EchoRoutes(), Tls::kOff);
  RawClient c = Plain();
  REQUIRE(c.Open(s.port()));
  auto ask = [&](const std::string& request) {
    REQUIRE(c.Send(request));
    std::optional<TestResponse> r = c.Receive();
    REQUIRE(r);
    return *r;
  };
  CHECK(ask("GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n").status == 404);
  const TestResponse wrong = ask("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(wrong.status == 405);
  CHECK(wrong.body.find("POST") != std::string::npos);
  const TestResponse ping = ask("GET /ping?x=1 HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(ping.status == 200);
  CHECK(ping.body == "pong\n");
  const TestResponse head = ask("HEAD /ping HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(head.status == 200);
  CHECK(head.body.empty());
  CHECK(Echoed(c));  // all on one kept-alive connection
}

// Every file descriptor of the process in use, until destroyed: the soft RLIMIT_NOFILE is
// lowered to just above the highest open one, and the free ones below it are filled.
class FdExhaustion {
 public:
  FdExhaustion() {
    reserve_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    int highest = reserve_;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
      int fd = 0;
      if (absl::SimpleAtoi(e.path().filename().string(), &fd)) {
        highest = std::max(highest, fd);
      }
    }
    rlimit low = saved_;
    low.rlim_cur = static_cast<rlim_t>(highest) + 1;
    lowered_ = ::setrlimit(RLIMIT_NOFILE, &low) == 0;
    for (;;) {
      const int fd = ::fcntl(reserve_, F_DUPFD_CLOEXEC, 0);
      if (fd < 0) {
        exhausted_ = errno == EMFILE;
        break;
      }
      fds_.push_back(fd);
    }
  }
  ~FdExhaustion() {
    for (const int fd : fds_) {
      ::close(fd);
    }
    ::setrlimit(RLIMIT_NOFILE, &saved_);
    ::close(reserve_);
  }
  FdExhaustion(const FdExhaustion&) = delete;
  FdExhaustion& operator=(const FdExhaustion&) = delete;

  bool ok() const { return reserve_ >= 0 && lowered_ && exhausted_; }

 private:
  int reserve_ = -1;
  rlimit saved_{};
  bool lowered_ = false;
  bool exhausted_ = false;
  std::vector<int> fds_;
};

double CpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

TEST_CASE("server backs off while file descriptors run out, then serves who waited") {
  Served s;
  std::vector<std::unique_ptr<RawClient>> clients;
  clients.reserve(3);
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<RawClient>());  // sockets first: connect needs none
  }
  ServerStats before;
  ServerStats after;
  double cpu = 0;
  double wall = 0;
  {
    FdExhaustion exhausted;
    REQUIRE(exhausted.ok());
    for (auto& c : clients) {
      REQUIRE(c->Connect(s.port()));  // the kernel completes it; the server's accept fails
    }
    before = s.server->stats();
    const double cpu0 = CpuSeconds();
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(seconds(1));
    cpu = CpuSeconds() - cpu0;
    wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    after = s.server->stats();
  }  // the descriptors are back
  INFO("accepts " << after.accepts - before.accepts << ", cpu " << cpu << " s in " << wall << " s");
  CHECK(after.accept_errors > 0);
  // 10 ms doubling to 1 s is about 7 attempts a second; a retry at once is tens of
  // thousands. The CPU bound is a spin detector, not a latency limit.
  CHECK(after.accepts - before.accepts < 50);
  CHECK(cpu < 0.2 * wall);
  for (auto& c : clients) {
    REQUIRE(c->Handshake());
    CHECK(Echoed(*c));
  }
  CHECK(s.LogLines("test cannot accept connections") == 1);  // once per burst
  CHECK(s.LogLines("test accepts connections again") == 1);
}

TEST_CASE("server closes connections past its caps at once, and serves once they close") {
  ServerOptions o;
  o.header_timeout = seconds(120);  // the held connections stay for the test's length
  REQUIRE(o.max_connections == 256);
  REQUIRE(o.max_connections_per_peer == 128);
  Served s(o);
  std::vector<std::unique_ptr<RawClient>> held;
  auto hold = [&](const std::string& from, int n) {
    for (int i = 0; i < n; ++i) {
      held.push_back(std::make_unique<RawClient>(from));
      REQUIRE(held.back()->Open(s.port()));
    }
  };
  hold("127.0.0.2", 128);
  RawClient over_peer("127.0.0.2", seconds(5));
  REQUIRE(over_peer.Connect(s.port()));
  CHECK_FALSE(over_peer.Handshake());
  hold("127.0.0.3", 128);
  RawClient over_all("127.0.0.4", seconds(5));
  REQUIRE(over_all.Connect(s.port()));
  CHECK_FALSE(over_all.Handshake());
  CHECK(s.server->stats().refused == 2);
  CHECK(s.server->stats().connections == 256);

  held.clear();
  // The server sees each close at its next read; a request gets in as soon as slots are back.
  CHECK(Eventually([&] {
    RawClient c("127.0.0.4");
    return c.Open(s.port()) && Echoed(c);
  }));
  CHECK(s.LogLines("test connections refused at the connection cap") == 1);  // both, one line
}

TEST_CASE("server in plain HTTP closes connections past a small cap at once") {
  ServerOptions o;
  o.header_timeout = seconds(120);
  o.max_connections = 3;
  o.max_connections_per_peer = 2;
  Served s(o, EchoRoutes(), Tls::kOff);
  std::vector<std::unique_ptr<RawClient>> held;
  auto hold = [&](const std::string& from) {
    held.push_back(std::make_unique<RawClient>(from, seconds(10), Wire::kPlain));
    REQUIRE(held.back()->Open(s.port()));
    REQUIRE(Echoed(*held.back()));  // served, so counted, before the next one comes
  };
  hold("127.0.0.2");
  hold("127.0.0.2");
  RawClient over_peer = Plain("127.0.0.2", seconds(5));
  REQUIRE(over_peer.Open(s.port()));
  CHECK(over_peer.ClosedWithin(seconds(5)));
  hold("127.0.0.3");
  RawClient over_all = Plain("127.0.0.4", seconds(5));
  REQUIRE(over_all.Open(s.port()));
  CHECK(over_all.ClosedWithin(seconds(5)));
  CHECK(s.server->stats().refused == 2);
  CHECK(s.server->stats().connections == 3);
}

// Sends one byte every 100 ms, up to `bytes`; how many went before the server closed.
int TrickleUntilClosed(RawClient& c, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    if (!c.Send("a") || c.ClosedWithin(milliseconds(100))) {
      return i;
    }
  }
  return bytes;
}

TEST_CASE("server closes a slow client at its timeout and answers others meanwhile") {
  ServerOptions o;
  o.header_timeout = seconds(1);
  o.body_timeout = seconds(1);
  Served s(o);
  constexpr int kBytes = 300;  // 30 s of trickle
  RawClient slow("127.0.0.2");
  SECTION("headers, a byte at a time") {
    REQUIRE(slow.Open(s.port()));
    REQUIRE(slow.Send("POST /echo HTTP/1.1\r\nHost: x\r\nX-Slow: "));
    RawClient other;
    REQUIRE(other.Open(s.port()));
    CHECK(Echoed(other));
    CHECK(TrickleUntilClosed(slow, kBytes) < kBytes);
  }
  SECTION("a body, a byte at a time") {
    REQUIRE(slow.Open(s.port()));
    REQUIRE(slow.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"));
    RawClient other;
    REQUIRE(other.Open(s.port()));
    CHECK(Echoed(other));
    CHECK(TrickleUntilClosed(slow, kBytes) < kBytes);
  }
  SECTION("the next request on a kept-alive connection, a byte at a time") {
    REQUIRE(slow.Open(s.port()));
    CHECK(Echoed(slow));
    REQUIRE(slow.Send("POST /echo HTTP/1.1\r\n"));
    RawClient other;
    REQUIRE(other.Open(s.port()));
    CHECK(Echoed(other));
    CHECK(TrickleUntilClosed(slow, kBytes) < kBytes);
  }
  SECTION("silence where the TLS handshake should be") {
    REQUIRE(slow.Connect(s.port()));
    RawClient other;
    REQUIRE(other.Open(s.port()));
    CHECK(Echoed(other));
    CHECK(slow.ClosedWithin(seconds(30)));
  }
}

TEST_CASE("server in plain HTTP closes a connection that sends nothing at its header timeout") {
  ServerOptions o;
  o.header_timeout = seconds(1);
  Served s(o, EchoRoutes(), Tls::kOff);
  RawClient idle = Plain("127.0.0.2");
  REQUIRE(idle.Open(s.port()));
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(idle.ClosedWithin(seconds(20)));
  CHECK(std::chrono::steady_clock::now() - t0 > milliseconds(500));  // not at once either
  RawClient other = Plain();
  REQUIRE(other.Open(s.port()));
  CHECK(Echoed(other));
}

TEST_CASE("server answers 413 to a body over the limit and serves on") {
  Served s;
  const std::string big(4 << 20, ' ');  // past the 3 MiB limit
  RawClient c;
  REQUIRE(c.Open(s.port()));
  SECTION("by its Content-Length") {
    // The whole body first, then the answer: what a simple client does.
    REQUIRE(c.Send(PostRequest(big, "/echo")));
  }
  SECTION("chunked, past the limit as it arrives") {
    REQUIRE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
    const std::string chunk(64 << 10, ' ');
    for (size_t sent = 0; sent < big.size(); sent += chunk.size()) {
      REQUIRE(c.Send(absl::StrCat("10000\r\n", chunk, "\r\n")));
    }
    REQUIRE(c.Send("0\r\n\r\n"));
  }
  const std::optional<TestResponse> r = c.Receive();
  REQUIRE(r);
  CHECK(r->status == 413);
  RawClient next;
  REQUIRE(next.Open(s.port()));
  CHECK(Echoed(next));
}

TEST_CASE("server answers 431 to headers over the limit, closes, and serves on") {
  ServerOptions o;
  REQUIRE(o.header_limit == 16 << 10);
  Served s(o, EchoRoutes(), Tls::kOff);
  RawClient c = Plain("127.0.0.2");
  REQUIRE(c.Open(s.port()));
  REQUIRE(c.Send(absl::StrCat("GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: ", std::string(20 << 10, 'a'),
                              "\r\n\r\n")));
  const std::optional<TestResponse> r = c.Receive();
  REQUIRE(r);
  CHECK(r->status == 431);
  CHECK(c.ClosedWithin(seconds(15)));
  RawClient next = Plain();
  REQUIRE(next.Open(s.port()));
  CHECK(Echoed(next));
}

TEST_CASE("server answers 400 to a request line that is not HTTP, closes, and serves on") {
  Served s({}, EchoRoutes(), Tls::kOff);
  for (const char* garbage :
       {"\x16\x03\x01\x02\x01\x01\r\n\r\n", "GET\r\n\r\n",
        "GET / HTTP/9.x\r\n\r\n", "G@T / HTTP/1.1\r\nHost: x\r\n\r\n"}) {
    DYNAMIC_SECTION(absl::CEscape(garbage)) {
      RawClient c = Plain("127.0.0.2");
      REQUIRE(c.Open(s.port()));
      REQUIRE(c.Send(garbage));
      const std::optional<TestResponse> r = c.Receive();
      REQUIRE(r);
      CHECK(r->status == 400);
      CHECK(r->head.find("connection: close") != std::string::npos);
      CHECK(c.ClosedWithin(seconds(15)));
      RawClient next = Plain();
      REQUIRE(next.Open(s.port()));
      CHECK(Echoed(next));
    }
  }
}

TEST_CASE("server presents the certificate its source gives at each new connection") {
  Served s;
  RawClient before;
  REQUIRE(before.Open(s.port()));
  CHECK(before.PeerCertificatePem() == s.pki.cert_pem);

  const testing::Pki next = testing::MakePki("IP:127.0.0.1");
  absl::StatusOr<std::shared_ptr<TlsServerContext>> ctx =
      MakeTlsServerContext(next.cert_pem, next.key_pem);
  REQUIRE(ctx.ok());
  s.SetContext(*ctx);
  RawClient after;
  REQUIRE(after.Open(s.port()));
  CHECK(after.PeerCertificatePem() == next.cert_pem);
  CHECK(Echoed(after));
  CHECK(Echoed(before));  // an open connection keeps the certificate it was accepted with
  CHECK(before.PeerCertificatePem() == s.pki.cert_pem);
}

TEST_CASE("a TLS server context refuses a key that is not its certificate's") {
  const testing::Pki a = testing::MakePki("IP:127.0.0.1");
  const testing::Pki b = testing::MakePki("IP:127.0.0.1");
  CHECK(MakeTlsServerContext(a.cert_pem, b.key_pem).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(MakeTlsServerContext("not a certificate", a.key_pem).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(MakeTlsServerContext(a.cert_pem, a.key_pem).ok());
}

}  // namespace
}  // namespace kmodd::http

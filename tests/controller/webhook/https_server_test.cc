// The webhook's HTTPS server against hostile clients: the real server on 127.0.0.1, port 0,
// with a throwaway certificate, and raw TLS clients from several loopback addresses.

#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "controller/webhook/https_server.h"
#include "tests/common/http/test_pki.h"
#include "tests/controller/webhook/reviews.h"
#include "tests/controller/webhook/tls_client.h"

namespace kmodd::webhook {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::PostRequest;
using testing::TestResponse;
using testing::TlsTestClient;

std::string ValidReview() { return testing::Review("CREATE", testing::ModuleJson(testing::kGood)); }

bool Allowed(const std::optional<TestResponse>& r) {
  if (!r || r->status != 200) {
    return false;
  }
  absl::StatusOr<Value> v = ParseJson(r->body);
  const Value* a = v.ok() ? Lookup(*v, {"response", "allowed"}) : nullptr;
  return a != nullptr && a->IsBool() && a->AsBool();
}

// The real server, its log in a temporary file.
struct Served {
  explicit Served(HttpsOptions o = {}, HttpsHandler handler = RouteWebhook)
      : pki(http::testing::MakePki("IP:127.0.0.1")), log_file(std::tmpfile()), log(log_file) {
    o.listen = "127.0.0.1:0";
    absl::StatusOr<std::unique_ptr<HttpsServer>> s =
        HttpsServer::Start(o, pki.cert_pem, pki.key_pem, std::move(handler), log);
    REQUIRE(s.ok());
    server = *std::move(s);
  }
  ~Served() {
    server.reset();
    std::fclose(log_file);
  }
  Served(const Served&) = delete;
  Served& operator=(const Served&) = delete;

  uint16_t port() const { return server->port(); }

  // How many log lines contain `what`.
  int LogLines(const std::string& what) {
    std::fflush(log_file);
    std::rewind(log_file);
    int n = 0;
    char line[4096];
    while (std::fgets(line, sizeof line, log_file) != nullptr) {
      n += std::string(line).find(what) != std::string::npos ? 1 : 0;
    }
    std::fseek(log_file, 0, SEEK_END);
    return n;
  }

  http::testing::Pki pki;
  std::FILE* log_file;
  Logger log;
  std::unique_ptr<HttpsServer> server;
};

// A handler that holds the requests it is asked to hold until released, and records when
// each starts and ends.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::vector<std::string> events;  // "start", "end"
  int held = 0;

  HttpsHandler Handler(std::function<bool(const std::string& target, size_t body)> hold) {
    return [this, hold](const std::string& method, const std::string& target,
                        const std::string& body) {
      if (!hold(target, body.size())) {
        return RouteWebhook(method, target, body);
      }
      std::unique_lock lock(mu);
      events.emplace_back("start");
      ++held;
      cv.notify_all();
      cv.wait_for(lock, seconds(60), [this] { return open; });  // bounded: a test never hangs
      events.emplace_back("end");
      return HttpsReply{200, "text/plain", "released\n"};
    };
  }
  bool WaitHeld(int n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, seconds(20), [&] { return held >= n; });
  }
  int Held() {
    std::lock_guard lock(mu);
    return held;
  }
  void Open() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
};

TEST_CASE("webhook server answers a review while another request's handler still runs") {
  Gate gate;
  Served s({}, gate.Handler([](const std::string& target, size_t) { return target == "/hold"; }));
  TlsTestClient held;
  REQUIRE(held.Open(s.port()));
  REQUIRE(held.Send(PostRequest("{}", "/hold")));
  REQUIRE(gate.WaitHeld(1));

  TlsTestClient other("127.0.0.1", seconds(5));
  CHECK(other.Open(s.port()));
  CHECK(Allowed(other.Post(ValidReview())));
  CHECK(gate.Held() == 1);  // answered while the first handler was still held
  gate.Open();
  const std::optional<TestResponse> r = held.Receive();
  REQUIRE(r);
  CHECK(r->body == "released\n");
}

TEST_CASE("webhook server keeps a thread for small reviews while large bodies are reviewed") {
  // Two workers: large bodies (past large_body) may use one of them.
  Gate gate;
  HttpsOptions o;
  REQUIRE(o.workers == 2);
  Served s(o, gate.Handler([&](const std::string&, size_t body) { return body > o.large_body; }));
  const std::string large = ValidReview() + std::string(o.large_body, ' ');
  TlsTestClient a("127.0.0.2");
  TlsTestClient b("127.0.0.2");
  REQUIRE(a.Open(s.port()));
  REQUIRE(b.Open(s.port()));
  REQUIRE(a.Send(PostRequest(large)));
  REQUIRE(b.Send(PostRequest(large)));
  REQUIRE(gate.WaitHeld(1));

  TlsTestClient small("127.0.0.1", seconds(5));
  CHECK(small.Open(s.port()));
  CHECK(Allowed(small.Post(ValidReview())));
  CHECK(gate.Held() == 1);  // the second large one waits for the first, the small one did not
  gate.Open();
  CHECK(a.Receive().has_value());
  CHECK(b.Receive().has_value());
  CHECK(gate.Held() == 2);
}

TEST_CASE("webhook server reads large bodies only within its memory budget") {
  // Three workers, so two large reviews could run at once; the budget holds one body.
  Gate gate;
  HttpsOptions o;
  o.workers = 3;
  o.body_memory = o.body_limit;
  Served s(o, gate.Handler([&](const std::string&, size_t body) { return body > o.large_body; }));
  const std::string large = ValidReview() + std::string(2 << 20, ' ');  // 2 MiB: two don't fit
  TlsTestClient a("127.0.0.2");
  TlsTestClient b("127.0.0.3");
  REQUIRE(a.Open(s.port()));
  REQUIRE(b.Open(s.port()));
  REQUIRE(a.Send(PostRequest(large)));
  REQUIRE(b.Send(PostRequest(large)));
  REQUIRE(gate.WaitHeld(1));
  TlsTestClient small("127.0.0.1", seconds(5));
  CHECK(small.Open(s.port()));
  CHECK(Allowed(small.Post(ValidReview())));  // small bodies need no budget
  std::this_thread::sleep_for(milliseconds(300));  // room for a second start, were it allowed
  gate.Open();
  CHECK(a.Receive().has_value());
  CHECK(b.Receive().has_value());
  std::lock_guard lock(gate.mu);
  CHECK(gate.events == std::vector<std::string>{"start", "end", "start", "end"});
}

TEST_CASE("webhook server answers 500 when the handler throws, and serves on") {
  Served s({}, [](const std::string& method, const std::string& target, const std::string& body) {
    if (target == "/throw") {
      throw std::runtime_error("boom");
    }
    return RouteWebhook(method, target, body);
  });
  TlsTestClient c;
  REQUIRE(c.Open(s.port()));
  REQUIRE(c.Send(PostRequest("{}", "/throw")));
  const std::optional<TestResponse> r = c.Receive();
  REQUIRE(r);
  CHECK(r->status == 500);
  CHECK(Allowed(c.Post(ValidReview())));  // the same connection
  REQUIRE(c.Send("GET /validate-module HTTP/1.1\r\nHost: x\r\n\r\n"));  // no body at all
  const std::optional<TestResponse> get = c.Receive();
  REQUIRE(get);
  CHECK(get->status == 405);
  CHECK(s.LogLines("boom") == 1);
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

TEST_CASE("webhook server backs off while file descriptors run out, then serves who waited") {
  Served s;
  std::vector<std::unique_ptr<TlsTestClient>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<TlsTestClient>());  // sockets first: connect needs none
  }
  HttpsStats before;
  HttpsStats after;
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
    CHECK(Allowed(c->Post(ValidReview())));
  }
  CHECK(s.LogLines("webhook cannot accept connections") == 1);  // once per burst
  CHECK(s.LogLines("webhook accepts connections again") == 1);
}

TEST_CASE("webhook server closes connections past its caps at once, and serves once they close") {
  HttpsOptions o;
  o.header_timeout = seconds(120);  // the held connections stay for the test's length
  REQUIRE(o.max_connections == 256);
  REQUIRE(o.max_connections_per_peer == 128);
  Served s(o);
  std::vector<std::unique_ptr<TlsTestClient>> held;
  auto hold = [&](const std::string& from, int n) {
    for (int i = 0; i < n; ++i) {
      held.push_back(std::make_unique<TlsTestClient>(from));
      REQUIRE(held.back()->Open(s.port()));
    }
  };
  hold("127.0.0.2", 128);
  TlsTestClient over_peer("127.0.0.2", seconds(5));
  REQUIRE(over_peer.Connect(s.port()));
  CHECK_FALSE(over_peer.Handshake());
  hold("127.0.0.3", 128);
  TlsTestClient over_all("127.0.0.4", seconds(5));
  REQUIRE(over_all.Connect(s.port()));
  CHECK_FALSE(over_all.Handshake());
  CHECK(s.server->stats().refused == 2);
  CHECK(s.server->stats().connections == 256);

  held.clear();
  // The server sees each close at its next read; a review gets in as soon as slots are back.
  bool served = false;
  for (int i = 0; i < 100 && !served; ++i) {
    TlsTestClient c("127.0.0.4");
    served = c.Open(s.port()) && Allowed(c.Post(ValidReview()));
    if (!served) {
      std::this_thread::sleep_for(milliseconds(100));
    }
  }
  CHECK(served);
  CHECK(s.LogLines("webhook connections refused at the connection cap") == 1);  // both, one line
}

// Sends one byte every 100 ms, up to `bytes`; how many went before the server closed.
int TrickleUntilClosed(TlsTestClient& c, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    if (!c.Send("a") || c.ClosedWithin(milliseconds(100))) {
      return i;
    }
  }
  return bytes;
}

TEST_CASE("webhook server closes a slow client at its timeout and answers others meanwhile") {
  HttpsOptions o;
  o.header_timeout = seconds(1);
  o.body_timeout = seconds(1);
  Served s(o);
  constexpr int kBytes = 300;  // 30 s of trickle
  TlsTestClient slow("127.0.0.2");
  SECTION("headers, a byte at a time") {
    REQUIRE(slow.Open(s.port()));
    REQUIRE(slow.Send("POST /validate-module HTTP/1.1\r\nHost: x\r\nX-Slow: "));
    TlsTestClient other;
    REQUIRE(other.Open(s.port()));
    CHECK(Allowed(other.Post(ValidReview())));
    CHECK(TrickleUntilClosed(slow, kBytes) < kBytes);
  }
  SECTION("a body, a byte at a time") {
    REQUIRE(slow.Open(s.port()));
    REQUIRE(slow.Send("POST /validate-module HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"));
    TlsTestClient other;
    REQUIRE(other.Open(s.port()));
    CHECK(Allowed(other.Post(ValidReview())));
    CHECK(TrickleUntilClosed(slow, kBytes) < kBytes);
  }
  SECTION("the next request on a kept-alive connection, a byte at a time") {
    REQUIRE(slow.Open(s.port()));
    CHECK(Allowed(slow.Post(ValidReview())));
    REQUIRE(slow.Send("POST /validate-module HTTP/1.1\r\n"));
    TlsTestClient other;
    REQUIRE(other.Open(s.port()));
    CHECK(Allowed(other.Post(ValidReview())));
    CHECK(TrickleUntilClosed(slow, kBytes) < kBytes);
  }
  SECTION("silence where the TLS handshake should be") {
    REQUIRE(slow.Connect(s.port()));
    TlsTestClient other;
    REQUIRE(other.Open(s.port()));
    CHECK(Allowed(other.Post(ValidReview())));
    CHECK(slow.ClosedWithin(seconds(30)));
  }
}

TEST_CASE("webhook server answers 413 to a body over the limit and serves on") {
  Served s;
  const std::string big(4 << 20, ' ');  // past the 3 MiB limit
  TlsTestClient c;
  REQUIRE(c.Open(s.port()));
  SECTION("by its Content-Length") {
    // The whole body first, then the answer: what a simple client does.
    REQUIRE(c.Send(PostRequest(big)));
  }
  SECTION("chunked, past the limit as it arrives") {
    REQUIRE(c.Send(
        "POST /validate-module HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
    const std::string chunk(64 << 10, ' ');
    for (size_t sent = 0; sent < big.size(); sent += chunk.size()) {
      REQUIRE(c.Send(absl::StrCat("10000\r\n", chunk, "\r\n")));
    }
    REQUIRE(c.Send("0\r\n\r\n"));
  }
  const std::optional<TestResponse> r = c.Receive();
  REQUIRE(r);
  CHECK(r->status == 413);
  TlsTestClient next;
  REQUIRE(next.Open(s.port()));
  CHECK(Allowed(next.Post(ValidReview())));
}

}  // namespace
}  // namespace kmodd::webhook

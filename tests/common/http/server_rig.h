#pragma once
// common/http's server as its tests run it: on 127.0.0.1, port 0, over TLS with a throwaway
// certificate (or plain), its log in a temporary file; and a handler that holds requests
// until released. Header-only (the unit binary compiles *_test.cc only).

#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/http/server.h"
#include "common/http/server_tls.h"
#include "common/log.h"
#include "tests/common/http/raw_client.h"
#include "tests/common/http/test_pki.h"

namespace kmodd::http::testing {

// POST /echo (workers): the body back. GET /ping (I/O thread): "pong\n".
inline Router EchoRoutes() {
  Router r;
  r.Add("POST", "/echo", RunOn::kWorkers,
        [](const ServerRequest& q) { return ServerReply{200, "text/plain", q.body}; });
  r.Add("GET", "/ping", RunOn::kIoThread,
        [](const ServerRequest&) { return ServerReply{200, "text/plain", "pong\n"}; });
  return r;
}

inline const std::string kSmall = "a small request body";

// POST /echo answered with its body.
inline bool Echoed(kmodd::testing::RawClient& c, const std::string& body = kSmall) {
  if (!c.Send(kmodd::testing::PostRequest(body, "/echo"))) {
    return false;
  }
  const std::optional<kmodd::testing::TestResponse> r = c.Receive();
  return r && r->status == 200 && r->body == body;
}

// A client of a plain-HTTP server.
inline kmodd::testing::RawClient Plain(
    const std::string& from = "127.0.0.1",
    std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  return kmodd::testing::RawClient(from, timeout, kmodd::testing::Wire::kPlain);
}

enum class Tls { kOn, kOff };

struct Served {
  explicit Served(ServerOptions o = {}, Router routes = EchoRoutes(), Tls tls = Tls::kOn)
      : pki(MakePki("IP:127.0.0.1")), log_file(std::tmpfile()), log(log_file) {
    o.name = "test";
    o.listen = "127.0.0.1:0";
    if (tls == Tls::kOn) {
      absl::StatusOr<std::shared_ptr<TlsServerContext>> ctx =
          MakeTlsServerContext(pki.cert_pem, pki.key_pem);
      REQUIRE(ctx.ok());
      context = *ctx;
      o.tls = [this] {
        std::lock_guard lock(mu);
        return context;
      };
    }
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o, std::move(routes), log);
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

  void SetContext(std::shared_ptr<TlsServerContext> c) {
    std::lock_guard lock(mu);
    context = std::move(c);
  }

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

  Pki pki;
  std::FILE* log_file;
  Logger log;
  std::mutex mu;
  std::shared_ptr<TlsServerContext> context;  // guarded by mu
  std::unique_ptr<Server> server;
};

// A handler that holds the requests it is asked to hold until released, and records when
// each starts and ends.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::vector<std::string> events;  // "start", "end"
  int held = 0;

  ServerHandler Handler(std::function<bool(const ServerRequest&)> hold) {
    return [this, hold = std::move(hold)](const ServerRequest& r) {
      if (!hold(r)) {
        return ServerReply{200, "text/plain", r.body};
      }
      std::unique_lock lock(mu);
      events.emplace_back("start");
      ++held;
      cv.notify_all();
      // Bounded: a test never hangs.
      cv.wait_for(lock, std::chrono::seconds(60), [this] { return open; });
      events.emplace_back("end");
      return ServerReply{200, "text/plain", "released\n"};
    };
  }
  bool WaitHeld(int n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(20), [&] { return held >= n; });
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

// Echo routes, /hold (on the workers) held by `gate` when `hold` says so.
inline Router HoldRoutes(Gate& gate, std::function<bool(const ServerRequest&)> hold) {
  Router r = EchoRoutes();
  r.Add("POST", "/hold", RunOn::kWorkers, gate.Handler(std::move(hold)));
  return r;
}

}  // namespace kmodd::http::testing

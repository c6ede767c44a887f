// kmodd-loadgen: its options, its summary arithmetic, and a fleet of simulated agents
// against a small in-test Controller that pushes a desired state, an equal re-push and a
// change.

#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "grpcpp/grpcpp.h"
#include "kmodd/v1/sync.grpc.pb.h"
#include "tools/loadgen/fleet.h"
#include "tools/loadgen/options.h"
#include "tools/loadgen/summary.h"

namespace kmodd::loadgen {
namespace {

TEST_CASE("loadgen spreads agents over one channel per hundred by default") {
  auto o = ParseOptions({"--controller", "127.0.0.1:1", "--agents", "5000", "--insecure",
                         "--label", "sim=true", "--wait-all-acked", "60", "--since-file", "f"});
  REQUIRE(o.ok());
  CHECK(o->connections == 50);
  CHECK(o->labels.at("sim") == "true");
  CHECK(o->kernel == "6.1.0-57-cloud-amd64");
  CHECK(ParseOptions({"--controller", "h:1", "--agents", "150", "--insecure"})->connections == 2);
  CHECK(ParseOptions({"--controller", "h:1", "--agents", "3", "--insecure", "--connections", "9"})
            ->connections == 3);
}

TEST_CASE("loadgen refuses incomplete or contradictory options") {
  CHECK_FALSE(ParseOptions({"--agents", "5", "--insecure"}).ok());
  CHECK_FALSE(ParseOptions({"--controller", "h:1", "--agents", "0", "--insecure"}).ok());
  CHECK_FALSE(ParseOptions({"--controller", "h:1", "--agents", "5"}).ok());
  CHECK_FALSE(ParseOptions({"--controller", "h:1", "--agents", "5", "--insecure", "--ca", "c"}).ok());
  CHECK_FALSE(ParseOptions({"--controller", "h:1", "--agents", "5", "--ca", "c"}).ok());
  CHECK_FALSE(ParseOptions({"--controller", "h:1", "--agents", "5", "--token-file", "t"}).ok());
  CHECK_FALSE(ParseOptions({"--controller", "h:1", "--agents", "5", "--ca", "c", "--cert", "c",
                            "--key", "k", "--token-file", "t"})
                  .ok());
  CHECK(ParseOptions({"--controller", "h:1", "--agents", "5", "--ca", "c", "--token-file", "t"})
            .ok());
  // One token per agent, from a directory: with --ca, and with no other credential.
  CHECK(ParseOptions({"--controller", "h:1", "--agents", "5", "--ca", "c", "--token-dir", "d"})
            .ok());
  CHECK_FALSE(ParseOptions({"--controller", "h:1", "--agents", "5", "--token-dir", "d"}).ok());
  CHECK_FALSE(ParseOptions({"--controller", "h:1", "--agents", "5", "--ca", "c", "--token-dir",
                            "d", "--token-file", "t"})
                  .ok());
  CHECK_FALSE(ParseOptions({"--controller", "h:1", "--agents", "5", "--ca", "c", "--cert", "c",
                            "--key", "k", "--token-dir", "d"})
                  .ok());
  CHECK_FALSE(ParseOptions({"--controller", "h:1", "--agents", "5", "--insecure", "--token-dir",
                            "d"})
                  .ok());
  CHECK_FALSE(
      ParseOptions({"--controller", "h:1", "--agents", "5", "--insecure", "--wait-all-acked", "9"})
          .ok());
  CHECK_FALSE(ParseOptions({"--controller", "h:1", "--agents", "5", "--insecure", "--label", "x"}).ok());
}

TEST_CASE("loadgen reconnects and dials with the agent's connect deadline unless told") {
  auto o = ParseOptions({"--controller", "h:1", "--agents", "5", "--insecure", "--reconnect"});
  REQUIRE(o.ok());
  CHECK(o->reconnect);
  CHECK(o->min_connect_timeout_ms == 0);
  o = ParseOptions({"--controller", "h:1", "--agents", "5", "--insecure",
                    "--min-connect-timeout-ms", "100"});
  REQUIRE(o.ok());
  CHECK(o->min_connect_timeout_ms == 100);
  CHECK_FALSE(o->reconnect);
}

TEST_CASE("loadgen names --min-connect-timeout-ms when its value is not a positive integer") {
  for (const std::string bad : {"0", "-100", "abc", "100ms", "", "99999999999", "1e3"}) {
    auto o = ParseOptions({"--controller", "h:1", "--agents", "5", "--insecure",
                           "--min-connect-timeout-ms", bad});
    REQUIRE_FALSE(o.ok());
    CHECK(o.status().message().find("--min-connect-timeout-ms") != std::string_view::npos);
  }
  auto missing =
      ParseOptions({"--controller", "h:1", "--agents", "5", "--insecure", "--min-connect-timeout-ms"});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("--min-connect-timeout-ms") != std::string_view::npos);
}

TEST_CASE("loadgen refuses --reconnect with a phase that ends the run") {
  auto o = ParseOptions({"--controller", "h:1", "--agents", "5", "--insecure", "--reconnect",
                         "--until-version-count", "2"});
  REQUIRE_FALSE(o.ok());
  CHECK(o.status().message().find("--reconnect") != std::string_view::npos);
  CHECK_FALSE(ParseOptions({"--controller", "h:1", "--agents", "5", "--insecure", "--reconnect",
                            "--wait-all-acked", "9", "--since-file", "f"})
                  .ok());
}

TEST_CASE("loadgen gives each agent with its own certificate its own connection") {
  auto o = ParseOptions({"--controller", "h:1", "--agents", "300", "--ca", "c", "--cert-dir", "d"});
  REQUIRE(o.ok());
  CHECK(o->connections == 300);
  CHECK(ParseOptions({"--controller", "h:1", "--agents", "3", "--ca", "c", "--cert-dir", "d",
                      "--connections", "3"})
            .ok());
  auto shared = ParseOptions({"--controller", "h:1", "--agents", "300", "--ca", "c", "--cert-dir",
                              "d", "--connections", "3"});
  REQUIRE_FALSE(shared.ok());
  CHECK(shared.status().message().find("--cert-dir") != std::string_view::npos);
  CHECK(shared.status().message().find("--connections") != std::string_view::npos);
  // One credential only, and always with --ca.
  CHECK_FALSE(ParseOptions({"--controller", "h:1", "--agents", "3", "--cert-dir", "d"}).ok());
  CHECK_FALSE(ParseOptions({"--controller", "h:1", "--agents", "3", "--insecure", "--cert-dir",
                            "d"})
                  .ok());
  CHECK_FALSE(ParseOptions({"--controller", "h:1", "--agents", "3", "--ca", "c", "--cert-dir", "d",
                            "--cert", "c", "--key", "k"})
                  .ok());
  CHECK_FALSE(ParseOptions({"--controller", "h:1", "--agents", "3", "--ca", "c", "--cert-dir", "d",
                            "--token-dir", "t"})
                  .ok());
  CHECK_FALSE(ParseOptions({"--controller", "h:1", "--agents", "3", "--ca", "c", "--cert", "c"}).ok());
}

TEST_CASE("the summary measures ACK times from the start mark, nearest-rank") {
  std::vector<int64_t> acked;
  for (int i = 1; i <= 100; ++i) {
    acked.push_back(1000 + i);
  }
  const Summary all = Summarize(100, 100, acked, 1000, false);
  CHECK(SummaryJson(all) ==
        "{\"agents\":100,\"connected\":100,\"acked\":100,\"first_ms\":1,\"p50_ms\":50,"
        "\"p99_ms\":99,\"all_ms\":100,\"timed_out\":false}");
  const Summary some = Summarize(200, 150, {1005}, 1000, true);
  CHECK(SummaryJson(some) ==
        "{\"agents\":200,\"connected\":150,\"acked\":1,\"first_ms\":5,\"p50_ms\":5,"
        "\"p99_ms\":5,\"all_ms\":null,\"timed_out\":true}");
  CHECK(SummaryJson(Summarize(3, 0, {}, 0, true)).find("\"first_ms\":null") != std::string::npos);
}

v1::NodeDesired Desired(const std::string& version, const std::vector<std::string>& names) {
  v1::NodeDesired d;
  d.set_version(version);
  for (const auto& n : names) {
    auto* m = d.add_modules();
    m->set_namespace_("ns");
    m->set_name(n);
    m->set_container_image("reg/" + n + ":1");
    m->mutable_modprobe()->set_module_name(n);
  }
  return d;
}

// Answers each hello with v1; on Change(), pushes an equal re-push and then a change.
class FakeController final : public v1::Controller::Service {
 public:
  grpc::Status Sync(grpc::ServerContext*,
                    grpc::ServerReaderWriter<v1::NodeDesired, v1::NodeReport>* stream) override {
    v1::NodeReport r;
    if (!stream->Read(&r)) {
      return grpc::Status::OK;
    }
    const std::string node = r.node().name();
    {
      std::lock_guard lock(mu_);
      hellos_[node] = r.node();
    }
    stream->Write(Desired(node + "-1", {"a"}));
    bool ended = false;
    std::thread pusher([&] {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return change_ || ended; });
      if (change_ && !ended) {
        lock.unlock();
        stream->Write(Desired(node + "-2", {"a"}));
        stream->Write(Desired(node + "-3", {"a", "b"}));
      }
    });
    while (stream->Read(&r)) {
      std::lock_guard lock(mu_);
      reports_[node].push_back(r);
    }
    {
      std::lock_guard lock(mu_);
      ended = true;
    }
    cv_.notify_all();
    pusher.join();
    return grpc::Status::OK;
  }

  // Until `nodes` nodes have ACKed their third version.
  bool WaitForAcks(size_t nodes, std::chrono::seconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      {
        std::lock_guard lock(mu_);
        size_t acked = 0;
        for (const auto& [node, reports] : reports_) {
          if (!reports.empty() && reports.back().ack().version() == node + "-3") {
            ++acked;
          }
        }
        if (acked == nodes) {
          return true;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  void Change() {
    {
      std::lock_guard lock(mu_);
      change_ = true;
    }
    cv_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool change_ = false;
  std::map<std::string, v1::NodeInfo> hellos_;
  std::map<std::string, std::vector<v1::NodeReport>> reports_;
};

TEST_CASE("simulated agents say hello, ACK every push and count only a changed one") {
  FakeController controller;
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&controller);
  auto server = b.BuildAndStart();
  REQUIRE(port > 0);

  auto options = ParseOptions({"--controller", "127.0.0.1:" + std::to_string(port), "--agents",
                               "20", "--connections", "3", "--insecure", "--label", "sim=true",
                               "--name-prefix", "t-"});
  REQUIRE(options.ok());
  const auto deadline = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(20); };
  {
    Fleet fleet(*options, grpc::InsecureChannelCredentials());
    fleet.Start();
    REQUIRE(fleet.WaitUntil([&] { return fleet.connected() == 20; }, deadline()));
    CHECK(fleet.changed_acked() == 0);
    const int64_t before = absl::ToUnixMillis(absl::Now());
    controller.Change();
    REQUIRE(fleet.WaitUntil([&] { return fleet.changed_acked() == 20; }, deadline()));
    CHECK(fleet.ReceivedAtLeast(3) == 20);
    const auto times = fleet.ChangedAckTimes();
    REQUIRE(times.size() == 20);
    for (int64_t t : times) {
      CHECK(t >= before);
    }
    CHECK(fleet.ReportJsonLines().find("\"agent\":\"t-7\",\"version\":\"t-7-3\",\"modules\":2,"
                                       "\"changed\":true") != std::string::npos);
    // An ACK handed to the transport may still be in flight: wait until the controller has
    // read every last ACK before cancelling the streams.
    REQUIRE(controller.WaitForAcks(20, std::chrono::seconds(20)));
    fleet.Stop();
    CHECK(fleet.Errors().empty());
  }
  server->Shutdown();

  std::lock_guard lock(controller.mu_);
  REQUIRE(controller.hellos_.size() == 20);
  const v1::NodeInfo& hello = controller.hellos_.at("t-0");
  CHECK(hello.labels().at("sim") == "true");
  CHECK(hello.kernel_release() == "6.1.0-57-cloud-amd64");
  CHECK(hello.architecture() == "amd64");
  CHECK(hello.boot_id().size() == 36);
  const auto& reports = controller.reports_.at("t-0");
  REQUIRE(reports.size() >= 3);
  const v1::NodeReport& last = reports.back();
  CHECK(last.ack().version() == "t-0-3");
  CHECK(last.ack().accepted());
  CHECK(last.applied_version() == "t-0-3");
  REQUIRE(last.modules_size() == 2);
  CHECK(last.modules(1).name() == "b");
  CHECK(last.modules(1).phase() == v1::LOADED);
  CHECK(last.modules(1).desired_version() == "t-0-3");
}

std::unique_ptr<grpc::Server> Serve(FakeController& controller, int& port) {
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                     &port);
  b.RegisterService(&controller);
  return b.BuildAndStart();
}

TEST_CASE("reconnecting agents open a new stream with a new hello when the controller returns") {
  auto first = std::make_unique<FakeController>();
  int port = 0;
  auto server = Serve(*first, port);
  REQUIRE(port > 0);
  auto options = ParseOptions({"--controller", "127.0.0.1:" + std::to_string(port), "--agents",
                               "10", "--connections", "2", "--insecure", "--reconnect"});
  REQUIRE(options.ok());
  const auto deadline = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(20); };
  Fleet fleet(*options, grpc::InsecureChannelCredentials());
  fleet.Start();
  REQUIRE(fleet.WaitUntil([&] { return fleet.live() == 10; }, deadline()));

  server->Shutdown(std::chrono::system_clock::now());
  REQUIRE(fleet.WaitUntil([&] { return fleet.live() == 0; }, deadline()));
  const int64_t mark = absl::ToUnixMillis(absl::Now());
  FakeController second;
  int same_port = port;
  auto again = Serve(second, same_port);
  REQUIRE(same_port == port);
  REQUIRE(fleet.WaitUntil([&] { return fleet.live() == 10; }, deadline()));

  CHECK(fleet.connected() == 10);  // agents, not streams
  const Fleet::Attempts attempts = fleet.AttemptsSince(mark);
  CHECK(attempts.started >= 10);
  CHECK(attempts.started - attempts.failed >= 10);
  for (int64_t t : fleet.LiveSinceTimes()) {
    CHECK(t >= mark);
  }
  fleet.Stop();
  again->Shutdown();
  std::lock_guard lock(second.mu_);
  CHECK(second.hellos_.size() == 10);
  CHECK(second.hellos_.at("sim-3").kernel_release() == "6.1.0-57-cloud-amd64");
}

}  // namespace
}  // namespace kmodd::loadgen

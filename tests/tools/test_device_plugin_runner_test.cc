// The test device plugin's runner (tools/test-device-plugin/runner.h) beside a stand-in for
// the kubelet's Registration service on a real gRPC unix socket: it registers with what the
// kubelet needs, and serves and registers again when its socket goes (a restarting kubelet
// empties the directory). Time moves only with the FakeClock.

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "common/log.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/fakes/fake_clock.h"
#include "tests/temp_dir.h"
#include "tools/test-device-plugin/options.h"
#include "tools/test-device-plugin/runner.h"

namespace tdp = kmodd::test_device_plugin;

namespace {

class Kubelet final : public v1beta1::Registration::Service {
 public:
  grpc::Status Register(grpc::ServerContext* /*ctx*/, const v1beta1::RegisterRequest* request,
                        v1beta1::Empty* /*reply*/) override {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(*request);
    cv_.notify_all();
    return grpc::Status::OK;
  }
  // Real time bounds only how long a broken test hangs.
  bool AwaitRequests(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] { return requests_.size() >= n; });
  }
  std::vector<v1beta1::RegisterRequest> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<v1beta1::RegisterRequest> requests_;
};

std::unique_ptr<grpc::Server> Serve(Kubelet& kubelet, const std::string& socket) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
  builder.RegisterService(&kubelet);
  return builder.BuildAndStart();
}

// The runner on its own thread until Stop() or the end of the scope (a failed REQUIRE
// leaves it early: the runner is stopped and joined rather than the process terminated).
struct RunningRunner {
  explicit RunningRunner(const tdp::Options& options)
      : devnull(std::fopen("/dev/null", "w")),
        log(devnull),
        runner(options, clock, log),
        thread([this] { result = runner.Run(); }) {}
  ~RunningRunner() {
    (void)Stop();
    std::fclose(devnull);
  }
  RunningRunner(const RunningRunner&) = delete;
  RunningRunner& operator=(const RunningRunner&) = delete;
  absl::Status Stop() {
    runner.Stop();
    if (thread.joinable()) {
      thread.join();
    }
    return result;
  }

  kmodd::FakeClock clock;
  std::FILE* devnull;
  kmodd::Logger log;
  tdp::Runner runner;
  absl::Status result = absl::UnknownError("not run");
  std::thread thread;
};

bool IsSocket(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

}  // namespace

TEST_CASE("test device plugin registers with the kubelet, and again when the kubelet empties its directory") {
  kmodd::testing::TempDir tmp("tdp-runner");
  REQUIRE_FALSE(tmp.path.empty());
  auto options = tdp::ParseOptions({"--resource", "w", "--count", "2", "--plugin-dir", tmp.path});
  REQUIRE(options.ok());
  const std::string kubelet_sock = tmp.path + "/kubelet.sock";
  const std::string plugin_sock = tmp.path + "/kmodd-test-w-0.sock";
  const std::string plugin_sock_again = tmp.path + "/kmodd-test-w-1.sock";

  Kubelet kubelet;
  std::unique_ptr<grpc::Server> server = Serve(kubelet, kubelet_sock);
  REQUIRE(server != nullptr);
  RunningRunner r(*options);
  kmodd::FakeClock& clock = r.clock;

  REQUIRE(kubelet.AwaitRequests(1));
  auto first = kubelet.requests().at(0);
  CHECK(first.version() == "v1beta1");
  CHECK(first.endpoint() == "kmodd-test-w-0.sock");
  CHECK(first.resource_name() == "kmodd.test/w");
  CHECK(first.options().get_preferred_allocation_available());
  CHECK(IsSocket(plugin_sock));

  // A kubelet restart empties the directory: our socket goes (the stand-in keeps serving on
  // its path; a second gRPC server there could lose its socket to the first one's teardown).
  ::unlink(plugin_sock.c_str());
  // The runner notices on its next tick; each tick waits one poll interval on the clock.
  for (int i = 0; i < 5 && kubelet.requests().size() < 2; ++i) {
    REQUIRE(clock.AwaitWaiters(1));
    clock.Advance(options->poll_interval);
    kubelet.AwaitRequests(2);
  }
  REQUIRE(kubelet.requests().size() == 2);
  CHECK(kubelet.requests().at(1).endpoint() == "kmodd-test-w-1.sock");
  CHECK(kubelet.requests().at(1).resource_name() == "kmodd.test/w");
  CHECK(IsSocket(plugin_sock_again));

  CHECK(r.Stop().ok());
  CHECK_FALSE(IsSocket(plugin_sock_again));  // it removes its socket when it stops
  server->Shutdown();
}

TEST_CASE("test device plugin answers the gRPC liveness probe KMM's DRA DaemonSet sets") {
  kmodd::testing::TempDir tmp("tdp-health");
  REQUIRE_FALSE(tmp.path.empty());
  // A free loopback port: bound, read, closed.
  int port = 0;
  {
    grpc::ServerBuilder probe;
    probe.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    Kubelet unused;
    probe.RegisterService(&unused);
    auto s = probe.BuildAndStart();
    REQUIRE(s != nullptr);
    s->Shutdown();
  }
  REQUIRE(port > 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  auto options = tdp::ParseOptions(
      {"--resource", "w", "--plugin-dir", tmp.path, "--health-address", address});
  REQUIRE(options.ok());
  RunningRunner r(*options);

  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  auto check = [&](const std::string& service, grpc::health::v1::HealthCheckResponse& out) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ctx.set_wait_for_ready(true);  // the runner's thread may not be serving yet
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    return stub->Check(&ctx, request, &out);
  };
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status s = check("liveness", response);
  REQUIRE(s.ok());
  CHECK(response.status() == grpc::health::v1::HealthCheckResponse::SERVING);
  s = check("", response);
  REQUIRE(s.ok());
  CHECK(response.status() == grpc::health::v1::HealthCheckResponse::SERVING);
  s = check("something-else", response);
  CHECK(s.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(r.Stop().ok());
}

// The test device plugin (tools/test-device-plugin): its options and health file (input it
// reads, so a table of hostile cases), its allocation rules, and the DevicePlugin service
// over a real gRPC unix socket with a real client, as the kubelet calls it.

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

#include "common/log.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "tests/fakes/fake_clock.h"
#include "tests/temp_dir.h"
#include "tools/test-device-plugin/devices.h"
#include "tools/test-device-plugin/options.h"
#include "tools/test-device-plugin/plugin.h"

namespace tdp = kmodd::test_device_plugin;
using namespace std::string_literals;  // NOLINT(google-build-using-namespace): "\0" in a case

TEST_CASE("test device plugin options: a name becomes kmodd.test/<name> with N devices") {
  auto o = tdp::ParseOptions({"--resource", "widget", "--count=3", "--health-file", "/run/h",
                              "--plugin-dir=/tmp/dp/", "--poll-interval-ms", "50"});
  REQUIRE(o.ok());
  CHECK(o->resource == "kmodd.test/widget");
  CHECK(o->name == "widget");
  CHECK(o->count == 3);
  CHECK(o->health_file == "/run/h");
  CHECK(o->plugin_dir == "/tmp/dp");
  CHECK(o->poll_interval.count() == 50);
  auto full = tdp::ParseOptions({"--resource=kmodd.test/gpu.a_1"});
  REQUIRE(full.ok());
  CHECK(full->resource == "kmodd.test/gpu.a_1");
  CHECK(full->count == 1);
  CHECK(full->plugin_dir == "/var/lib/kubelet/device-plugins");
  CHECK(full->health_address.empty());
  auto health = tdp::ParseOptions({"--resource=w", "--health-address", "127.0.0.1:51515"});
  REQUIRE(health.ok());
  CHECK(health->health_address == "127.0.0.1:51515");
}

TEST_CASE("test device plugin options: bad input is refused naming the flag") {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{}, "--resource is required"},
      {{"--count", "2"}, "--resource is required"},
      {{"--resource"}, "--resource needs a value"},
      {{"--resource", ""}, "--resource"},
      {{"--resource", "nvidia.com/gpu"}, "--resource"},  // another vendor's domain
      {{"--resource", "a/b"}, "--resource"},
      {{"--resource", "-x"}, "--resource"},
      {{"--resource", "x-"}, "--resource"},
      {{"--resource", "a b"}, "--resource"},
      {{"--resource", "a\nb"}, "--resource"},
      {{"--resource", std::string(64, 'a')}, "--resource"},
      {{"--resource", "w", "--count", "0"}, "--count \"0\""},
      {{"--resource", "w", "--count", "257"}, "--count"},
      {{"--resource", "w", "--count", "-1"}, "--count"},
      {{"--resource", "w", "--count", "1e3"}, "--count"},
      {{"--resource", "w", "--count", "99999999999999999999"}, "--count"},
      {{"--resource", "w", "--health-file", "relative"}, "--health-file"},
      {{"--resource", "w", "--health-file", "/a\x01"}, "--health-file"},
      {{"--resource", "w", "--plugin-dir", ""}, "--plugin-dir"},
      {{"--resource", "w", "--poll-interval-ms", "1"}, "--poll-interval-ms"},
      {{"--resource", "w", "--health-address", "0.0.0.0:51515"}, "--health-address"},
      {{"--resource", "w", "--health-address", "127.0.0.1:0"}, "--health-address"},
      {{"--resource", "w", "--health-address", "127.0.0.1:65536"}, "--health-address"},
      {{"--resource", "w", "--health-address", "127.0.0.1:x"}, "--health-address"},
      {{"--resource", "w", "--health-address", "127.0.0.1"}, "--health-address"},
      {{"--resource", "w", "--bogus", "1"}, "unknown flag --bogus"},
      {{"--resource", "w", "stray"}, "unexpected argument \"stray\""},
  };
  for (const Case& c : cases) {
    INFO(c.says);
    auto o = tdp::ParseOptions(c.args);
    REQUIRE_FALSE(o.ok());
    CHECK(o.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(o.status().message()), Catch::Contains(c.says));
  }
}

TEST_CASE("test device plugin health file: rules by device or for all, unnamed stay Healthy") {
  auto ids = tdp::DeviceIds("w", 3);
  REQUIRE(ids == std::vector<std::string>{"w-0", "w-1", "w-2"});
  auto h = tdp::ParseHealthFile("# a comment\n\nw-1 Unhealthy\r\n", ids);
  REQUIRE(h.ok());
  CHECK(*h == tdp::Health{{"w-0", true}, {"w-1", false}, {"w-2", true}});
  h = tdp::ParseHealthFile("* Unhealthy\nw-2  Healthy\n", ids);
  REQUIRE(h.ok());
  CHECK(*h == tdp::Health{{"w-0", false}, {"w-1", false}, {"w-2", true}});
  h = tdp::ParseHealthFile("", ids);
  REQUIRE(h.ok());
  CHECK(*h == tdp::AllDevices(ids, true));
}

TEST_CASE("test device plugin health file: hostile content is refused whole, naming the line") {
  auto ids = tdp::DeviceIds("w", 2);
  struct Case {
    std::string content;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"w-0 Unhealthy\nw-9 Unhealthy\n", "line 2: no device \"w-9\""},
      {"w-0 unhealthy\n", "line 1: the health is Healthy or Unhealthy"},
      {"w-0\n", "line 1: want"},
      {"w-0 Healthy extra\n", "line 1: want"},
      {"w-0 Healthy\nw-1 Un\0healthy\n"s, "line 2: a control character"},
      {"w-0 Healthy\x1b[2J\n", "line 1: a control character"},
      {"../etc Healthy\n", "no device"},
      {std::string(tdp::kMaxHealthFileBytes + 1, '#'), "at most"},
      {"w-0 " + std::string(10000, 'H') + "\n", "not \"" + std::string(64, 'H') + "\""},
  };
  for (const Case& c : cases) {
    INFO(c.says);
    auto h = tdp::ParseHealthFile(c.content, ids);
    REQUIRE_FALSE(h.ok());
    CHECK(h.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(h.status().message()), Catch::Contains(c.says));
  }
}

TEST_CASE("test device plugin allocation: only our devices, each once; preferred is stable") {
  auto devices = tdp::AllDevices(tdp::DeviceIds("w", 12), true);
  CHECK(tdp::CheckAllocation({"w-0", "w-11"}, devices).ok());
  CHECK(tdp::CheckAllocation({}, devices).code() == absl::StatusCode::kInvalidArgument);
  CHECK(tdp::CheckAllocation({"w-12"}, devices).code() == absl::StatusCode::kInvalidArgument);
  CHECK(tdp::CheckAllocation({"w-1", "w-1"}, devices).code() == absl::StatusCode::kInvalidArgument);
  auto env = tdp::AllocationEnv("kmodd.test/w", {"w-3", "w-1"});
  CHECK(env.at("KMODD_TEST_DEVICES") == "w-3,w-1");
  CHECK(env.at("KMODD_TEST_RESOURCE") == "kmodd.test/w");
  // Must-include first, then the lowest numbers (w-2 before w-10), nothing not ours.
  CHECK(tdp::PreferredAllocation({"w-10", "x-1", "w-2", "w-5"}, {"w-5"}, 3, devices) ==
        std::vector<std::string>{"w-5", "w-2", "w-10"});
  CHECK(tdp::PreferredAllocation({"w-1"}, {}, 0, devices).empty());
  CHECK(tdp::PreferredAllocation({"w-1", "w-1"}, {"w-1"}, 2, devices) ==
        std::vector<std::string>{"w-1"});
}

TEST_CASE("test device plugin serves ListAndWatch and Allocate over gRPC as the kubelet calls them") {
  kmodd::testing::TempDir tmp("tdp");
  REQUIRE_FALSE(tmp.path.empty());
  auto options = tdp::ParseOptions({"--resource", "w", "--count", "2", "--poll-interval-ms", "100"});
  REQUIRE(options.ok());
  kmodd::FakeClock clock;
  std::FILE* devnull = std::fopen("/dev/null", "w");
  REQUIRE(devnull != nullptr);
  kmodd::Logger log(devnull);
  tdp::TestDevicePlugin plugin(*options, clock, log, tdp::AllDevices(tdp::DeviceIds("w", 2), true));
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + tmp.path + "/p.sock", grpc::InsecureServerCredentials());
  builder.RegisterService(&plugin);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  REQUIRE(server != nullptr);
  auto stub = v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix:" + tmp.path + "/p.sock", grpc::InsecureChannelCredentials()));

  v1beta1::DevicePluginOptions opts;
  {
    grpc::ClientContext ctx;
    REQUIRE(stub->GetDevicePluginOptions(&ctx, v1beta1::Empty(), &opts).ok());
  }
  CHECK(opts.get_preferred_allocation_available());
  CHECK_FALSE(opts.pre_start_required());

  grpc::ClientContext watch_ctx;
  auto stream = stub->ListAndWatch(&watch_ctx, v1beta1::Empty());
  v1beta1::ListAndWatchResponse list;
  REQUIRE(stream->Read(&list));
  REQUIRE(list.devices_size() == 2);
  CHECK(list.devices(0).id() == "w-0");
  CHECK(list.devices(1).health() == "Healthy");

  plugin.SetHealth({{"w-0", true}, {"w-1", false}});
  REQUIRE(stream->Read(&list));
  REQUIRE(list.devices_size() == 2);
  CHECK(list.devices(0).health() == "Healthy");
  CHECK(list.devices(1).health() == "Unhealthy");

  v1beta1::AllocateRequest request;
  request.add_container_requests()->add_devices_ids("w-1");
  v1beta1::AllocateResponse response;
  {
    grpc::ClientContext ctx;
    REQUIRE(stub->Allocate(&ctx, request, &response).ok());
  }
  REQUIRE(response.container_responses_size() == 1);
  CHECK(response.container_responses(0).envs().at("KMODD_TEST_DEVICES") == "w-1");

  request.mutable_container_requests(0)->add_devices_ids("w-7");
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub->Allocate(&ctx, request, &response);
    CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(s.error_message(), Catch::Contains("w-7"));
  }

  // Stop ends the stream cleanly, so that the server shuts down without waiting on it.
  plugin.Stop();
  CHECK_FALSE(stream->Read(&list));
  CHECK(stream->Finish().ok());
  server->Shutdown();
  std::fclose(devnull);
}

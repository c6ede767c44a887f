#include "tools/test-device-plugin/runner.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tools/test-device-plugin/health.h"
#include "tools/test-device-plugin/plugin.h"

namespace kmodd::test_device_plugin {
namespace {

// gRPC measures deadlines on the real clock, whatever Clock the runner was given: these
// bound a call to a process that hangs, they decide nothing of the runner's own timing.
constexpr std::chrono::seconds kRegisterTimeout{5};
constexpr std::chrono::seconds kShutdownGrace{2};

// A socket's identity: a new one at the same path (the kubelet restarted, or someone else
// replaced ours) has another inode. 0 (no file has it) when there is no socket there.
ino_t SocketInode(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
    return 0;
  }
  return st.st_ino;
}

}  // namespace

Runner::Runner(const Options& options, const Clock& clock, Logger& log)
    : options_(options),
      clock_(clock),
      log_(log),
      ids_(DeviceIds(options.name, options.count)),
      kubelet_socket_(absl::StrCat(options.plugin_dir, "/kubelet.sock")) {}

std::string Runner::SocketName(int generation) const {
  return absl::StrCat("kmodd-test-", options_.name, "-", generation, ".sock");
}

void Runner::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

bool Runner::stopped() {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_;
}

bool Runner::Sleep() {
  std::unique_lock<std::mutex> lock(mu_);
  return clock_.WaitFor(lock, cv_, options_.poll_interval, [&] { return stop_; });
}

Health Runner::ReadHealth(const Health& previous) {
  if (options_.health_file.empty()) {
    return AllDevices(ids_, true);
  }
  std::ifstream in(options_.health_file, std::ios::binary);
  if (!in) {
    // Absent (or unreadable) means the thing behind the devices is not there.
    return AllDevices(ids_, false);
  }
  std::string content(kMaxHealthFileBytes + 1, '\0');
  in.read(content.data(), static_cast<std::streamsize>(content.size()));
  content.resize(static_cast<size_t>(in.gcount()));
  absl::StatusOr<Health> parsed = ParseHealthFile(content, ids_);
  if (!parsed.ok()) {
    std::string error(parsed.status().message());
    if (error != last_health_error_) {
      log_.Warn("health file refused; keeping the devices' health as it was",
                {{"file", options_.health_file}, {"error", error}});
      last_health_error_ = error;
    }
    return previous;
  }
  last_health_error_.clear();
  return *parsed;
}

absl::Status Runner::Run() {
  std::unique_ptr<grpc::Server> health_server;
  LivenessService liveness;
  if (!options_.health_address.empty()) {
    ::grpc::ServerBuilder builder;
    builder.AddListeningPort(options_.health_address, ::grpc::InsecureServerCredentials());
    builder.RegisterService(&liveness);
    health_server = builder.BuildAndStart();
    if (health_server == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("cannot serve gRPC health on ", options_.health_address));
    }
    log_.Info("serving gRPC health", {{"address", options_.health_address}});
  }
  absl::Status s = Serve();
  if (health_server != nullptr) {
    health_server->Shutdown();
  }
  return s;
}

absl::Status Runner::Serve() {
  Health health = ReadHealth(AllDevices(ids_, false));
  for (int generation = 0; !stopped(); ++generation) {
    const std::string socket_name = SocketName(generation);
    const std::string socket_path = absl::StrCat(options_.plugin_dir, "/", socket_name);
    // Serve first: the kubelet dials our endpoint as soon as Register arrives.
    if (SocketInode(socket_path) != 0 && ::unlink(socket_path.c_str()) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot remove the old socket ", socket_path, ": ", std::strerror(errno)));
    }
    struct stat st {};
    if (::lstat(socket_path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(socket_path, " exists and is not a socket: not ours to remove"));
    }
    auto plugin = std::make_unique<TestDevicePlugin>(options_, clock_, log_, health);
    grpc::ServerBuilder builder;
    builder.AddListeningPort(absl::StrCat("unix:", socket_path),
                             grpc::InsecureServerCredentials());
    builder.RegisterService(plugin.get());
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    const ino_t ours = SocketInode(socket_path);
    if (server == nullptr || ours == 0) {
      log_.Warn("cannot serve on the plugin socket; retrying", {{"socket", socket_path}});
      if (server != nullptr) {
        server->Shutdown();
      }
      if (Sleep()) {
        break;
      }
      continue;
    }

    // Register, retried each interval until the kubelet answers.
    ino_t kubelet = 0;
    std::string last_error;
    while (!stopped()) {
      kubelet = SocketInode(kubelet_socket_);
      if (kubelet != 0) {
        auto channel = grpc::CreateChannel(absl::StrCat("unix:", kubelet_socket_),
                                           grpc::InsecureChannelCredentials());
        auto stub = v1beta1::Registration::NewStub(channel);
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + kRegisterTimeout);
        v1beta1::RegisterRequest request;
        request.set_version("v1beta1");
        request.set_endpoint(socket_name);
        request.set_resource_name(options_.resource);
        *request.mutable_options() = TestDevicePlugin::PluginOptions();
        v1beta1::Empty reply;
        grpc::Status s = stub->Register(&ctx, request, &reply);
        if (s.ok()) {
          log_.Info("registered with the kubelet", {{"resource", options_.resource},
                                                    {"devices", options_.count},
                                                    {"socket", socket_path}});
          break;
        }
        last_error = s.error_message();
      } else {
        last_error = absl::StrCat(kubelet_socket_, " is not there");
      }
      log_.Info("waiting for the kubelet", {{"error", last_error}});
      kubelet = 0;
      if (Sleep()) {
        break;
      }
    }

    // Watch until the kubelet's socket or ours changes.
    while (kubelet != 0 && !stopped()) {
      Health next = ReadHealth(plugin->health());
      plugin->SetHealth(next);
      if (SocketInode(kubelet_socket_) != kubelet) {
        log_.Info("the kubelet's socket changed; registering again", {});
        break;
      }
      if (SocketInode(socket_path) != ours) {
        log_.Info("our socket was removed (kubelet restart); serving again", {});
        break;
      }
      if (Sleep()) {
        break;
      }
    }
    health = plugin->health();
    plugin->Stop();
    server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
    server->Wait();
    if (SocketInode(socket_path) == ours) {
      ::unlink(socket_path.c_str());
    }
  }
  return absl::OkStatus();
}

}  // namespace kmodd::test_device_plugin

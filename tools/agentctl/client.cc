#include "tools/agentctl/client.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"

namespace kmodd::agentctl {

namespace {

// Unary calls are local and quick; pruning the image cache deletes trees and may not be.
constexpr absl::Duration kCallTimeout = absl::Seconds(30);
constexpr absl::Duration kPruneTimeout = absl::Minutes(5);

void SetDeadline(grpc::ClientContext& ctx, absl::Duration timeout) {
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

std::string ErrnoText(int err) {
  std::string s = std::strerror(err);
  if (!s.empty()) {
    s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
  }
  return s;
}

}  // namespace

absl::Status Unreachable(const std::string& socket_path, const std::string& detail) {
  return absl::UnavailableError(absl::StrCat("cannot reach the agent at ", socket_path, ": ",
                                             detail,
                                             "; is kmodd-agent running, and are you root?"));
}

absl::StatusOr<std::unique_ptr<AgentClient>> AgentClient::Connect(
    const std::string& socket_path) {
  struct stat st{};
  if (stat(socket_path.c_str(), &st) != 0) {
    return Unreachable(socket_path, ErrnoText(errno));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return Unreachable(socket_path, "not a unix socket");
  }
  // connect(2) on a unix socket needs write permission on it.
  if (access(socket_path.c_str(), R_OK | W_OK) != 0) {
    return Unreachable(socket_path, ErrnoText(errno));
  }
  auto channel =
      grpc::CreateChannel(absl::StrCat("unix:", socket_path), grpc::InsecureChannelCredentials());
  return std::unique_ptr<AgentClient>(new AgentClient(socket_path, v1::Agent::NewStub(channel)));
}

absl::Status AgentClient::Convert(const grpc::Status& s, const char* method) const {
  if (s.ok()) {
    return absl::OkStatus();
  }
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return Unreachable(socket_path_, s.error_message());
  }
  // The agent maps its absl::Status codes to gRPC's one to one.
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(method, ": ", s.error_message()));
}

absl::StatusOr<v1::StatusResponse> AgentClient::Status() {
  grpc::ClientContext ctx;
  SetDeadline(ctx, kCallTimeout);
  v1::StatusResponse resp;
  if (auto s = Convert(stub_->Status(&ctx, v1::StatusRequest(), &resp), "status"); !s.ok()) {
    return s;
  }
  return resp;
}

absl::StatusOr<v1::PreviewPassResponse> AgentClient::PreviewPass() {
  grpc::ClientContext ctx;
  SetDeadline(ctx, kCallTimeout);
  v1::PreviewPassResponse resp;
  if (auto s = Convert(stub_->PreviewPass(&ctx, v1::PreviewPassRequest(), &resp), "plan"); !s.ok()) {
    return s;
  }
  return resp;
}

absl::StatusOr<v1::OverrideResponse> AgentClient::Load(const v1::ModuleSpec& module) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, kCallTimeout);
  v1::OverrideRequest req;
  *req.mutable_module() = module;
  v1::OverrideResponse resp;
  if (auto s = Convert(stub_->Load(&ctx, req, &resp), "load"); !s.ok()) {
    return s;
  }
  return resp;
}

absl::StatusOr<v1::OverrideResponse> AgentClient::Unload(const std::string& ns,
                                                         const std::string& name) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, kCallTimeout);
  v1::OverrideRequest req;
  req.mutable_module()->set_namespace_(ns);
  req.mutable_module()->set_name(name);
  v1::OverrideResponse resp;
  if (auto s = Convert(stub_->Unload(&ctx, req, &resp), "unload"); !s.ok()) {
    return s;
  }
  return resp;
}

absl::StatusOr<v1::FirmwareResponse> AgentClient::Firmware() {
  grpc::ClientContext ctx;
  SetDeadline(ctx, kCallTimeout);
  v1::FirmwareResponse resp;
  if (auto s = Convert(stub_->Firmware(&ctx, v1::FirmwareRequest(), &resp), "firmware");
      !s.ok()) {
    return s;
  }
  return resp;
}

absl::StatusOr<v1::ImagesResponse> AgentClient::Images(bool prune) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, prune ? kPruneTimeout : kCallTimeout);
  v1::ImagesRequest req;
  req.set_prune(prune);
  v1::ImagesResponse resp;
  if (auto s = Convert(stub_->Images(&ctx, req, &resp), "images"); !s.ok()) {
    return s;
  }
  return resp;
}

absl::Status AgentClient::Events(bool replay, absl::Duration stop_when_idle,
                                 const std::function<void(const v1::Event&)>& on_event) {
  grpc::ClientContext ctx;
  v1::EventsRequest req;
  req.set_replay(replay);
  std::unique_ptr<grpc::ClientReader<v1::Event>> reader = stub_->Events(&ctx, req);

  // The stream has no end-of-replay marker: a watchdog cancels it once it has been quiet
  // for `stop_when_idle`. Sync reads cannot time out by themselves.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool idle_cancelled = false;
  absl::Time last = absl::Now();
  std::thread watchdog;
  if (stop_when_idle > absl::ZeroDuration()) {
    watchdog = std::thread([&] {
      std::unique_lock lock(mu);
      while (!done) {
        const absl::Time deadline = last + stop_when_idle;
        if (absl::Now() >= deadline) {
          idle_cancelled = true;
          ctx.TryCancel();
          return;
        }
        cv.wait_until(lock, absl::ToChronoTime(deadline));
      }
    });
  }
  v1::Event e;
  while (reader->Read(&e)) {
    {
      std::lock_guard lock(mu);
      last = absl::Now();
    }
    on_event(e);
  }
  const grpc::Status status = reader->Finish();
  {
    std::lock_guard lock(mu);
    done = true;
  }
  cv.notify_all();
  if (watchdog.joinable()) {
    watchdog.join();
  }
  if (idle_cancelled && status.error_code() == grpc::StatusCode::CANCELLED) {
    return absl::OkStatus();
  }
  return Convert(status, "events");
}

}  // namespace kmodd::agentctl

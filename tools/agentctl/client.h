#pragma once

// The Agent service's client, as agentctl uses it: one unix socket, one channel, every
// failure as an absl::Status whose message a person can act on. No formatting here.

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kmodd/v1/agent.grpc.pb.h"

namespace kmodd::agentctl {

inline constexpr char kDefaultSocket[] = "/run/kmodd/agent.sock";

class AgentClient {
 public:
  // Checks that `socket_path` exists, is a socket and may be opened, so that the common
  // failures (agent not running, not root) say so instead of a gRPC transport message.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<AgentClient>> Connect(
      const std::string& socket_path);

  [[nodiscard]] absl::StatusOr<v1::StatusResponse> Status();
  [[nodiscard]] absl::StatusOr<v1::PreviewPassResponse> PreviewPass();
  [[nodiscard]] absl::StatusOr<v1::OverrideResponse> Load(const v1::ModuleSpec& module);
  [[nodiscard]] absl::StatusOr<v1::OverrideResponse> Unload(const std::string& ns,
                                                            const std::string& name);
  [[nodiscard]] absl::StatusOr<v1::FirmwareResponse> Firmware();
  [[nodiscard]] absl::StatusOr<v1::ImagesResponse> Images(bool prune);

  // Streams events to `on_event` until the stream ends. With `stop_when_idle` > 0 the call
  // returns once no event has come for that long (the replayed backlog has been printed);
  // with zero it follows until the agent goes away or the process is interrupted.
  [[nodiscard]] absl::Status Events(bool replay, absl::Duration stop_when_idle,
                                    const std::function<void(const v1::Event&)>& on_event);

  const std::string& socket_path() const { return socket_path_; }

 private:
  AgentClient(std::string socket_path, std::unique_ptr<v1::Agent::Stub> stub)
      : socket_path_(std::move(socket_path)), stub_(std::move(stub)) {}

  absl::Status Convert(const grpc::Status& s, const char* method) const;

  std::string socket_path_;
  std::unique_ptr<v1::Agent::Stub> stub_;
};

// "cannot reach the agent at PATH: DETAIL; is kmodd-agent running, and are you root?"
absl::Status Unreachable(const std::string& socket_path, const std::string& detail);

}  // namespace kmodd::agentctl

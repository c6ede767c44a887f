#pragma once

// The agent's end of Controller.Sync: dials the controller, says hello (a report with
// NodeInfo), ACKs or NACKs every pushed NodeDesired, and sends a full report whenever the
// observed state changes (a burst coalesced for a few milliseconds). Reconnects with
// jittered backoff (100 ms .. 30 s) forever; a dropped stream changes nothing on the node
// (fail-static: the reconciler keeps the last accepted desired state).
//
// Trust: with TLS, only a controller whose certificate chains to the configured CA is
// accepted, and the agent presents its own certificate (CN = node name), or, in
// Kubernetes, a projected service-account token bound to its pod and node, which is how
// the controller binds a stream to a node. Plain text only when explicitly asked (insecure).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "common/log.h"
#include "kmodd/v1/sync.grpc.pb.h"
#include "node-agent/server/agent_state.h"
#include "node-agent/server/backoff.h"
#include "node-agent/server/node_info.h"
#include "node-agent/server/reconciler.h"
#include "node-agent/server/sync_channel_args.h"  // SyncChannelArguments

namespace kmodd::agent {

struct SyncClientOptions {
  std::string target;  // host:port
  bool insecure = false;
  std::string ca_pem;    // trusted roots for the controller's certificate
  std::string cert_pem;  // the agent's certificate (CN = node name)
  std::string key_pem;
  std::string target_name_override;  // name checked in the controller's certificate
  // Kubernetes: read again before every stream (the kubelet rotates the token, and the CA
  // ConfigMap may appear after the agent started). ca_file replaces ca_pem; the token is
  // sent as `authorization: Bearer` metadata.
  std::string ca_file;
  std::string token_file;
  BackoffPolicy backoff{std::chrono::milliseconds(100), std::chrono::seconds(30)};
  std::chrono::milliseconds coalesce{5};
  // Where an accepted desired state is written (binary NodeDesired, 0600, atomically)
  // before it is ACKed; "" = not persisted.
  std::string desired_path;
  uint64_t seed = std::random_device{}();
};

class SyncClient {
 public:
  using DesiredHandler = std::function<void(DesiredState)>;

  SyncClient(SyncClientOptions options, NodeFacts facts, AgentState& state,
             DesiredHandler on_desired, Logger& log);
  ~SyncClient();
  SyncClient(const SyncClient&) = delete;
  SyncClient& operator=(const SyncClient&) = delete;

  void Start();
  void Stop();

 private:
  void Run();
  // One stream, until it ends. True when the controller answered at least once.
  bool Session();
  v1::NodeReport Answer(const v1::NodeDesired& d);
  // Re-reads ca_file and remakes the channel when it changed. False when it cannot be read.
  bool RefreshChannel();

  SyncClientOptions options_;
  NodeFacts facts_;
  AgentState& state_;
  DesiredHandler on_desired_;
  Logger& log_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Controller::Stub> stub_;
  std::string channel_ca_;  // the CA the channel was made with

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  grpc::ClientContext* ctx_ = nullptr;  // the live stream's, for Stop
  std::string last_error_;
  std::thread thread_;
};

}  // namespace kmodd::agent

#pragma once

// The local Agent service (agent.proto) for agentctl, on a unix socket only root can use
// (local_socket.h: bound in a 0700 directory of the agent's, every peer checked with
// SO_PEERCRED). A client of the same state the Sync client reports; debugging overrides
// go to the reconciler, validated as the controller's desired state is.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/log.h"
#include "firmware/shadow.h"
#include "firmware/stager.h"
#include "kmodd/v1/agent.grpc.pb.h"
#include "node-agent/image/cache.h"
#include "node-agent/server/agent_state.h"
#include "node-agent/server/local_socket.h"
#include "node-agent/server/node_info.h"
#include "node-agent/server/reconciler.h"

namespace kmodd::agent {

struct LocalServiceDeps {
  AgentState* state = nullptr;
  Reconciler* reconciler = nullptr;
  NodeFacts facts;
  // The firmware ledger and its directory; empty when firmware is not staged.
  std::function<std::vector<firmware::StagedFile>()> firmware;
  // Which of those paths shadow the host's own firmware; unset: none is reported.
  std::function<std::vector<firmware::Shadow>(const std::vector<std::string>&)> shadowed;
  std::string firmware_dir;
  image::ImageCache* cache = nullptr;  // null: no image cache
};

// Pull progress by image: bytes done and total (image::ImageCache::InFlight).
using PullProgress = std::map<std::string, std::pair<int64_t, int64_t>>;

// The Events stream: each event of `sub` as it comes and, every progress period (on
// `clock`), a PullProgress event for each pull in flight whose progress changed; until
// `write` fails or `stop` says so (looked at every period). `inflight` may be empty.
void StreamEvents(EventSubscription& sub, const Clock& clock,
                  const std::function<PullProgress()>& inflight,
                  const std::function<bool(const AgentEvent&)>& write,
                  const std::function<bool()>& stop);

class LocalService final : public v1::Agent::Service {
 public:
  LocalService(LocalServiceDeps deps, const Clock& clock)
      : deps_(std::move(deps)), clock_(clock) {}

  grpc::Status Status(grpc::ServerContext* ctx, const v1::StatusRequest* req,
                      v1::StatusResponse* resp) override;
  grpc::Status Events(grpc::ServerContext* ctx, const v1::EventsRequest* req,
                      grpc::ServerWriter<v1::Event>* writer) override;
  grpc::Status PreviewPass(grpc::ServerContext* ctx, const v1::PreviewPassRequest* req,
                    v1::PreviewPassResponse* resp) override;
  grpc::Status Load(grpc::ServerContext* ctx, const v1::OverrideRequest* req,
                    v1::OverrideResponse* resp) override;
  grpc::Status Unload(grpc::ServerContext* ctx, const v1::OverrideRequest* req,
                      v1::OverrideResponse* resp) override;
  grpc::Status Firmware(grpc::ServerContext* ctx, const v1::FirmwareRequest* req,
                        v1::FirmwareResponse* resp) override;
  grpc::Status Images(grpc::ServerContext* ctx, const v1::ImagesRequest* req,
                      v1::ImagesResponse* resp) override;

  // Ends every Events stream (they poll it).
  void Shutdown() { stopping_ = true; }

 private:
  LocalServiceDeps deps_;
  const Clock& clock_;
  std::atomic<bool> stopping_{false};
};

// A gRPC server for `service` on the agent's unix socket (BindPrivateSocket): connections
// are accepted by a PeerCheckedAcceptor and only root's (or the agent's own uid's) reach
// gRPC; each refused one is logged to `log` (may be null). Stop removes the socket again.
class LocalServer {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<LocalServer>> Start(
      const std::string& socket_path, LocalService& service, Logger* log = nullptr);
  ~LocalServer();
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;
  void Stop();

  // The socket file itself: the configured path, or PATH.d/NAME behind a link at PATH.
  const std::string& bound_path() const { return socket_.bound; }
  int64_t refused_peers() const { return acceptor_ ? acceptor_->refused() : refused_at_stop_; }

 private:
  LocalServer(BoundSocket socket, LocalService& service, std::unique_ptr<grpc::Server> server)
      : socket_(std::move(socket)), service_(service), server_(std::move(server)) {}

  BoundSocket socket_;
  LocalService& service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<PeerCheckedAcceptor> acceptor_;
  int64_t refused_at_stop_ = 0;
};

grpc::Status ToGrpc(const absl::Status& s);

}  // namespace kmodd::agent

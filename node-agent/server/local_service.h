#pragma once

// The local Agent service (agent.proto) for agentctl, on a unix socket only root can open:
// the socket is 0600 and a directory the agent creates for it is 0700. A client of the
// same state the Sync client reports; debugging overrides go to the reconciler.

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "firmware/stager.h"
#include "kmodd/v1/agent.grpc.pb.h"
#include "node-agent/image/cache.h"
#include "node-agent/server/agent_state.h"
#include "node-agent/server/node_info.h"
#include "node-agent/server/reconciler.h"

namespace kmodd::server {

struct LocalServiceDeps {
  AgentState* state = nullptr;
  Reconciler* reconciler = nullptr;
  NodeFacts facts;
  // The firmware ledger and its directory; empty when firmware is not staged.
  std::function<std::vector<firmware::StagedFile>()> firmware;
  std::string firmware_dir;
  image::ImageCache* cache = nullptr;  // null: no image cache
};

// Removes the cached image trees no module uses: neither a tree the reconciler resolved or
// the journal records, nor one an image of the desired state (`state`'s modules) resolved to
// before (so a node that restarts without its registry keeps what it will need). Refused
// while a pull is in flight. Returns the removed paths. `agentctl images --prune` and the
// agent's periodic GC both come here.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> PruneUnusedImages(Reconciler& reconciler,
                                                                       image::ImageCache& cache,
                                                                       const AgentState& state);

class LocalService final : public v1::Agent::Service {
 public:
  explicit LocalService(LocalServiceDeps deps) : deps_(std::move(deps)) {}

  grpc::Status Status(grpc::ServerContext* ctx, const v1::StatusRequest* req,
                      v1::StatusResponse* resp) override;
  grpc::Status Events(grpc::ServerContext* ctx, const v1::EventsRequest* req,
                      grpc::ServerWriter<v1::Event>* writer) override;
  grpc::Status Plan(grpc::ServerContext* ctx, const v1::PlanRequest* req,
                    v1::PlanResponse* resp) override;
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
  std::atomic<bool> stopping_{false};
};

// A gRPC server for `service` on a unix socket. A stale socket file is replaced; the file
// is removed again by Stop.
class LocalServer {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<LocalServer>> Start(
      const std::string& socket_path, LocalService& service);
  ~LocalServer();
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;
  void Stop();

 private:
  LocalServer(std::string path, LocalService& service, std::unique_ptr<grpc::Server> server)
      : path_(std::move(path)), service_(service), server_(std::move(server)) {}

  std::string path_;
  LocalService& service_;
  std::unique_ptr<grpc::Server> server_;
};

grpc::Status ToGrpc(const absl::Status& s);

}  // namespace kmodd::server

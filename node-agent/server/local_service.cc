#include "node-agent/server/local_service.h"

#include <grpcpp/server_posix.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "node-agent/server/image_gc.h"
#include "node-agent/server/wire.h"
#include "proto/convert.h"

namespace kmodd::agent {

namespace {

namespace fs = std::filesystem;

constexpr auto kProgressPeriod = std::chrono::milliseconds(250);
constexpr int kMaxThreads = 8;

bool Under(const std::string& path, const std::string& dir) {
  return path == dir || path.rfind(dir + "/", 0) == 0;
}

int64_t TreeBytes(const std::string& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_regular_file(ec)) {
      total += static_cast<int64_t>(it->file_size(ec));
    }
  }
  return total;
}

}  // namespace

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) {
    return grpc::Status::OK;
  }
  // absl and gRPC share the canonical code numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

grpc::Status LocalService::Status(grpc::ServerContext* /*ctx*/, const v1::StatusRequest* /*req*/,
                                  v1::StatusResponse* resp) {
  const AgentSnapshot s = deps_.state->Snapshot();
  *resp->mutable_node() = ToProto(deps_.facts);
  for (const auto& m : s.modules) {
    *resp->add_modules() = ToProto(m);
  }
  resp->set_desired_version(s.desired_version);
  resp->set_desired_source(s.desired_source);
  resp->set_controller_connected(s.controller.connected);
  resp->set_controller(s.controller.address);
  resp->set_controller_since_unix_ms(s.controller.since_unix_ms);
  for (const auto& o : s.overrides) {
    resp->add_overrides(o);
  }
  return grpc::Status::OK;
}

void StreamEvents(EventSubscription& sub, const Clock& clock,
                  const std::function<PullProgress()>& inflight,
                  const std::function<bool(const AgentEvent&)>& write,
                  const std::function<bool()>& stop) {
  PullProgress last;
  while (!stop()) {
    for (const auto& e : sub.Next(clock.MonotonicNow() + kProgressPeriod)) {
      if (!write(e)) {
        return;
      }
    }
    if (!inflight) {
      continue;
    }
    PullProgress now = inflight();
    for (const auto& [image, progress] : now) {
      const auto before = last.find(image);  // nothing before counts as 0 of 0
      if (progress == (before == last.end() ? std::pair<int64_t, int64_t>{0, 0} : before->second)) {
        continue;
      }
      const AgentEvent e{absl::ToUnixMillis(clock.Now()), "PullProgress", "", image,
                         api::Phase::kPulling, progress.first, progress.second};
      if (!write(e)) {
        return;
      }
    }
    last = std::move(now);
  }
}

grpc::Status LocalService::Events(grpc::ServerContext* ctx, const v1::EventsRequest* req,
                                  grpc::ServerWriter<v1::Event>* writer) {
  auto sub = deps_.state->Subscribe(req->replay());
  std::function<PullProgress()> inflight;
  if (deps_.cache != nullptr) {
    inflight = [cache = deps_.cache] { return cache->InFlight(); };
  }
  StreamEvents(
      *sub, clock_, inflight, [writer](const AgentEvent& e) { return writer->Write(ToProto(e)); },
      [this, ctx] { return ctx->IsCancelled() || stopping_.load(); });
  return grpc::Status::OK;
}

grpc::Status LocalService::PreviewPass(grpc::ServerContext* /*ctx*/, const v1::PreviewPassRequest* /*req*/,
                                v1::PreviewPassResponse* resp) {
  auto plan = deps_.reconciler->PreviewPass();
  if (!plan.ok()) {
    return ToGrpc(plan.status());
  }
  for (const auto& a : plan->actions) {
    v1::PassAction* p = resp->add_actions();
    p->set_kind(reconcile::KindName(a.kind));
    p->set_module(a.key);
    p->set_reason(a.why);
  }
  for (const auto& problem : plan->problems) {
    resp->add_problems(problem);
  }
  return grpc::Status::OK;
}

grpc::Status LocalService::Load(grpc::ServerContext* /*ctx*/, const v1::OverrideRequest* req,
                                v1::OverrideResponse* resp) {
  auto spec = proto::FromProto(req->module());
  if (!spec.ok()) {
    return ToGrpc(spec.status());
  }
  resp->set_message(deps_.reconciler->OverrideLoad(std::move(*spec)));
  return grpc::Status::OK;
}

grpc::Status LocalService::Unload(grpc::ServerContext* /*ctx*/, const v1::OverrideRequest* req,
                                  v1::OverrideResponse* resp) {
  if (req->module().namespace_().empty() || req->module().name().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "unload needs the module's namespace and name");
  }
  resp->set_message(deps_.reconciler->OverrideUnload(
      absl::StrCat(req->module().namespace_(), "/", req->module().name())));
  return grpc::Status::OK;
}

grpc::Status LocalService::Firmware(grpc::ServerContext* /*ctx*/,
                                    const v1::FirmwareRequest* /*req*/,
                                    v1::FirmwareResponse* resp) {
  resp->set_directory(deps_.firmware_dir);
  if (!deps_.firmware) {
    return grpc::Status::OK;
  }
  const std::vector<firmware::StagedFile> files = deps_.firmware();
  std::map<std::string, std::string> shadows;  // path -> the host's file
  if (deps_.shadowed) {
    std::vector<std::string> paths;
    paths.reserve(files.size());
    for (const auto& f : files) {
      paths.push_back(f.path);
    }
    for (const auto& s : deps_.shadowed(paths)) {
      shadows[s.path] = s.host_file;
    }
  }
  for (const auto& f : files) {
    v1::FirmwareFile* out = resp->add_files();
    out->set_path(f.path);
    for (const auto& o : f.owners) {
      out->add_owners(o);
    }
    if (auto s = shadows.find(f.path); s != shadows.end()) {
      out->set_shadows(s->second);
    }
  }
  return grpc::Status::OK;
}

grpc::Status LocalService::Images(grpc::ServerContext* /*ctx*/, const v1::ImagesRequest* req,
                                  v1::ImagesResponse* resp) {
  if (deps_.cache == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "this agent has no image cache");
  }
  image::ImageCache& cache = *deps_.cache;
  if (req->prune()) {
    auto pruned = PruneUnusedImages(*deps_.reconciler, cache, *deps_.state);
    if (!pruned.ok()) {
      return ToGrpc(pruned.status());
    }
    for (const auto& p : *pruned) {
      resp->add_pruned(p);
    }
  }
  auto entries = cache.List();
  if (!entries.ok()) {
    return ToGrpc(entries.status());
  }
  const std::set<std::string> in_use = deps_.reconciler->InUseTrees();
  for (const auto& e : *entries) {
    v1::CachedImage* out = resp->add_images();
    out->set_tree(e.tree);
    out->set_path(e.path);
    for (const auto& r : e.references) {
      out->add_references(r);
    }
    bool used = false;
    for (const auto& u : in_use) {
      used = used || Under(u, e.path);
    }
    out->set_in_use(used);
    out->set_bytes(TreeBytes(e.path));
  }
  return grpc::Status::OK;
}

absl::StatusOr<std::unique_ptr<LocalServer>> LocalServer::Start(const std::string& socket_path,
                                                                LocalService& service,
                                                                Logger* log) {
  auto socket = BindPrivateSocket(socket_path);
  if (!socket.ok()) {
    return socket.status();
  }
  // No listening port: connections come from the acceptor, after their peer is checked.
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  grpc::ResourceQuota quota("kmodd-agent-local");
  quota.SetMaxThreads(kMaxThreads);
  builder.SetResourceQuota(quota);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 1);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    RemoveBoundSocket(*socket);
    return absl::UnavailableError(absl::StrCat("cannot start the local Agent service on ",
                                               socket_path));
  }
  std::unique_ptr<LocalServer> out(new LocalServer(std::move(*socket), service, std::move(server)));
  grpc::Server* grpc_server = out->server_.get();
  auto acceptor = PeerCheckedAcceptor::Start(
      out->socket_.fd.get(), [grpc_server](int fd) { grpc::AddInsecureChannelFromFd(grpc_server, fd); },
      [log, path = socket_path](const RefusedPeer& p) {
        if (log != nullptr) {
          log->Warn("local client refused: only root may use the agent socket",
                    {{"socket", path},
                     {"uid", static_cast<int64_t>(p.uid)},
                     {"pid", static_cast<int64_t>(p.pid)}});
        }
      });
  if (!acceptor.ok()) {
    out->Stop();
    return acceptor.status();
  }
  out->acceptor_ = std::move(*acceptor);
  return out;
}

LocalServer::~LocalServer() { Stop(); }

void LocalServer::Stop() {
  if (!server_) {
    return;
  }
  // The acceptor first: nothing is handed to a server that is shutting down.
  if (acceptor_) {
    acceptor_->Stop();
    refused_at_stop_ = acceptor_->refused();
    acceptor_.reset();
  }
  service_.Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_->Wait();
  server_.reset();
  RemoveBoundSocket(socket_);
  (void)socket_.fd.Close(socket_.bound);
}

}  // namespace kmodd::agent

#include "tools/test-device-plugin/plugin.h"

#include <string>
#include <utility>
#include <vector>

namespace kmodd::test_device_plugin {
namespace {

std::vector<std::string> Ids(const google::protobuf::RepeatedPtrField<std::string>& field) {
  return {field.begin(), field.end()};
}

grpc::Status ToGrpc(const absl::Status& s) {
  return {static_cast<grpc::StatusCode>(s.code()), std::string(s.message())};
}

}  // namespace

TestDevicePlugin::TestDevicePlugin(const Options& options, const Clock& clock, Logger& log,
                                   Health health)
    : options_(options), clock_(clock), log_(log), health_(std::move(health)) {}

v1beta1::DevicePluginOptions TestDevicePlugin::PluginOptions() {
  v1beta1::DevicePluginOptions o;
  o.set_pre_start_required(false);
  o.set_get_preferred_allocation_available(true);
  return o;
}

void TestDevicePlugin::SetHealth(const Health& health) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (health == health_) {
      return;
    }
    health_ = health;
    ++generation_;
  }
  changed_.notify_all();
}

Health TestDevicePlugin::health() const {
  std::lock_guard<std::mutex> lock(mu_);
  return health_;
}

void TestDevicePlugin::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
  }
  changed_.notify_all();
}

grpc::Status TestDevicePlugin::GetDevicePluginOptions(grpc::ServerContext* /*context*/,
                                                      const v1beta1::Empty* /*request*/,
                                                      v1beta1::DevicePluginOptions* response) {
  *response = PluginOptions();
  return grpc::Status::OK;
}

grpc::Status TestDevicePlugin::ListAndWatch(
    grpc::ServerContext* context, const v1beta1::Empty* /*request*/,
    grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) {
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t sent = 0;
  bool first = true;
  while (!stopped_) {
    if (first || sent != generation_) {
      v1beta1::ListAndWatchResponse response;
      int healthy = 0;
      for (const auto& [id, ok] : health_) {
        v1beta1::Device* d = response.add_devices();
        d->set_id(id);
        d->set_health(std::string(ok ? kHealthy : kUnhealthy));
        healthy += ok ? 1 : 0;
      }
      sent = generation_;
      first = false;
      lock.unlock();
      bool written = writer->Write(response);
      log_.Info("device list sent", {{"resource", options_.resource},
                                     {"devices", static_cast<int>(response.devices_size())},
                                     {"healthy", healthy},
                                     {"written", written}});
      lock.lock();
      if (!written) {
        return grpc::Status::OK;  // the kubelet went away; it will dial again after Register
      }
    }
    // Woken by a change or Stop; the interval only bounds how long a stream the kubelet
    // cancelled stays open.
    clock_.WaitFor(lock, changed_, options_.poll_interval,
                   [&] { return stopped_ || sent != generation_; });
    if (context->IsCancelled()) {
      return grpc::Status::OK;
    }
  }
  return grpc::Status::OK;
}

grpc::Status TestDevicePlugin::GetPreferredAllocation(
    grpc::ServerContext* /*context*/, const v1beta1::PreferredAllocationRequest* request,
    v1beta1::PreferredAllocationResponse* response) {
  Health devices = health();
  for (const v1beta1::ContainerPreferredAllocationRequest& r : request->container_requests()) {
    v1beta1::ContainerPreferredAllocationResponse* out = response->add_container_responses();
    for (std::string& id : PreferredAllocation(Ids(r.available_deviceids()),
                                               Ids(r.must_include_deviceids()),
                                               r.allocation_size(), devices)) {
      out->add_deviceids(std::move(id));
    }
  }
  return grpc::Status::OK;
}

grpc::Status TestDevicePlugin::Allocate(grpc::ServerContext* /*context*/,
                                        const v1beta1::AllocateRequest* request,
                                        v1beta1::AllocateResponse* response) {
  Health devices = health();
  for (const v1beta1::ContainerAllocateRequest& r : request->container_requests()) {
    std::vector<std::string> ids = Ids(r.devices_ids());
    if (absl::Status s = CheckAllocation(ids, devices); !s.ok()) {
      log_.Warn("allocation refused", {{"resource", options_.resource},
                                       {"error", std::string(s.message())}});
      return ToGrpc(s);
    }
    v1beta1::ContainerAllocateResponse* out = response->add_container_responses();
    for (auto& [k, v] : AllocationEnv(options_.resource, ids)) {
      (*out->mutable_envs())[k] = v;
    }
    log_.Info("devices allocated", {{"resource", options_.resource},
                                    {"devices", out->envs().at("KMODD_TEST_DEVICES")}});
  }
  return grpc::Status::OK;
}

grpc::Status TestDevicePlugin::PreStartContainer(grpc::ServerContext* /*context*/,
                                                 const v1beta1::PreStartContainerRequest* /*req*/,
                                                 v1beta1::PreStartContainerResponse* /*resp*/) {
  return grpc::Status::OK;
}

}  // namespace kmodd::test_device_plugin

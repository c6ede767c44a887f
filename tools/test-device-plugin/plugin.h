#pragma once

// The DevicePlugin gRPC service the kubelet calls (deviceplugin/v1beta1): the device list
// and its changes (ListAndWatch), Allocate, GetPreferredAllocation, PreStartContainer.
// One instance serves one registration: after the kubelet restarts, the runner makes a new
// server and a new instance with the health the old one had.

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "common/clock.h"
#include "common/log.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "tools/test-device-plugin/devices.h"
#include "tools/test-device-plugin/options.h"

namespace kmodd::test_device_plugin {

class TestDevicePlugin final : public v1beta1::DevicePlugin::Service {
 public:
  TestDevicePlugin(const Options& options, const Clock& clock, Logger& log, Health health);

  // Replaces the devices' health; open ListAndWatch streams send the new list when it differs.
  void SetHealth(const Health& health);
  Health health() const;
  // Ends every ListAndWatch stream (they return OK) so that the server can shut down.
  void Stop();

  grpc::Status GetDevicePluginOptions(grpc::ServerContext* context, const v1beta1::Empty* request,
                                      v1beta1::DevicePluginOptions* response) override;
  grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty* request,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override;
  grpc::Status GetPreferredAllocation(grpc::ServerContext* context,
                                      const v1beta1::PreferredAllocationRequest* request,
                                      v1beta1::PreferredAllocationResponse* response) override;
  grpc::Status Allocate(grpc::ServerContext* context, const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* response) override;
  grpc::Status PreStartContainer(grpc::ServerContext* context,
                                 const v1beta1::PreStartContainerRequest* request,
                                 v1beta1::PreStartContainerResponse* response) override;

  static v1beta1::DevicePluginOptions PluginOptions();

 private:
  const Options& options_;
  const Clock& clock_;
  Logger& log_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  Health health_;          // guarded by mu_
  uint64_t generation_ = 0;  // guarded by mu_; bumped on every change of health_
  bool stopped_ = false;     // guarded by mu_
};

}  // namespace kmodd::test_device_plugin

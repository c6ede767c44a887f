#pragma once

// grpc.health.v1.Health for the kubelet's gRPC liveness probe (what KMM's DRA DaemonSet
// sets: port 51515, service "liveness"): SERVING for "" and "liveness", NOT_FOUND for any
// other service, as the protocol says.

#include "grpc/health/v1/health.grpc.pb.h"

namespace kmodd::test_device_plugin {

class LivenessService final : public grpc::health::v1::Health::Service {
 public:
  ::grpc::Status Check(::grpc::ServerContext* context,
                       const grpc::health::v1::HealthCheckRequest* request,
                       grpc::health::v1::HealthCheckResponse* response) override;
};

}  // namespace kmodd::test_device_plugin

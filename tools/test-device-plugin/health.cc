#include "tools/test-device-plugin/health.h"

namespace kmodd::test_device_plugin {

::grpc::Status LivenessService::Check(::grpc::ServerContext* /*context*/,
                                      const grpc::health::v1::HealthCheckRequest* request,
                                      grpc::health::v1::HealthCheckResponse* response) {
  if (!request->service().empty() && request->service() != "liveness") {
    return {::grpc::StatusCode::NOT_FOUND, "unknown service"};
  }
  response->set_status(grpc::health::v1::HealthCheckResponse::SERVING);
  return ::grpc::Status::OK;
}

}  // namespace kmodd::test_device_plugin

#include <catch2/catch.hpp>

#include <string>

#include "common/http/headers.h"
#include "common/http/status.h"

namespace kmodd::http {
namespace {

TEST_CASE("HTTP statuses map to what the caller should do next") {
  const std::pair<int, absl::StatusCode> rows[] = {
      {200, absl::StatusCode::kOk},
      {204, absl::StatusCode::kOk},
      {206, absl::StatusCode::kOk},
      {304, absl::StatusCode::kFailedPrecondition},
      {400, absl::StatusCode::kInvalidArgument},
      {401, absl::StatusCode::kUnauthenticated},
      {403, absl::StatusCode::kPermissionDenied},
      {404, absl::StatusCode::kNotFound},
      {405, absl::StatusCode::kUnimplemented},
      {408, absl::StatusCode::kUnavailable},
      {409, absl::StatusCode::kFailedPrecondition},
      {410, absl::StatusCode::kNotFound},
      {416, absl::StatusCode::kOutOfRange},
      {418, absl::StatusCode::kInvalidArgument},
      {429, absl::StatusCode::kUnavailable},
      {500, absl::StatusCode::kUnavailable},
      {501, absl::StatusCode::kUnimplemented},
      {502, absl::StatusCode::kUnavailable},
      {503, absl::StatusCode::kUnavailable},
      {504, absl::StatusCode::kUnavailable},
      {599, absl::StatusCode::kUnavailable},
  };
  for (const auto& [status, code] : rows) {
    INFO(status);
    CHECK(CodeForHttpStatus(status) == code);
  }
}

TEST_CASE("StatusOf names the URL without its query, the status and the body's start") {
  Response response;
  response.status = 401;
  response.reason = "Unauthorized";
  response.url = *ParseUrl("https://registry.example/v2/r/manifests/v1?X-Amz-Signature=secret");
  response.body = "{\"errors\":[{\"code\":\"UNAUTHORIZED\"}]}\n" + std::string(1000, 'x');
  const absl::Status status = StatusOf(response);
  CHECK(absl::IsUnauthenticated(status));
  const std::string message(status.message());
  CHECK(message.find("https://registry.example/v2/r/manifests/v1: HTTP 401 Unauthorized: "
                     "{\"errors\":[{\"code\":\"UNAUTHORIZED\"}]} xxx") == 0);
  CHECK(message.find("secret") == std::string::npos);
  CHECK(message.size() < 400);

  response.status = 200;
  CHECK(StatusOf(response).ok());
}

TEST_CASE("header names compare without case and repeated fields are all kept") {
  Headers headers{{"WWW-Authenticate", "Bearer a"}, {"Content-Type", "text/plain"}};
  headers.Add("www-authenticate", "Basic b");
  CHECK(headers.Get("content-type") == "text/plain");
  CHECK(headers.GetAll("Www-Authenticate") == std::vector<std::string>{"Bearer a", "Basic b"});
  headers.Set("CONTENT-TYPE", "application/json");
  CHECK(headers.GetAll("Content-Type") == std::vector<std::string>{"application/json"});
  headers.Remove("www-AUTHENTICATE");
  CHECK_FALSE(headers.Has("WWW-Authenticate"));
  CHECK_FALSE(headers.Get("Missing").has_value());
}

}  // namespace
}  // namespace kmodd::http

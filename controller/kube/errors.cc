#include "controller/kube/errors.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/http/status.h"
#include "common/json.h"

namespace kmodd::kube {

absl::StatusCode CodeForKubeStatus(int http_status, std::string_view reason) {
  switch (http_status) {
    case 404:
      return absl::StatusCode::kNotFound;
    case 409:
      return reason == "AlreadyExists" ? absl::StatusCode::kAlreadyExists
                                       : absl::StatusCode::kAborted;
    case 410:
      return absl::StatusCode::kOutOfRange;
    case 400:
    case 422:
      return absl::StatusCode::kInvalidArgument;
    default:
      return http::CodeForHttpStatus(http_status);
  }
}

namespace {

absl::Status FromStatusObject(std::string_view what, int http_status, const Value& status,
                              std::string_view fallback) {
  const std::string reason = StringAt(status, {"reason"});
  std::string message = StringAt(status, {"message"});
  if (message.empty()) {
    message = std::string(fallback);
  }
  const int code = http_status != 0 ? http_status : static_cast<int>(IntAt(status, {"code"}));
  return absl::Status(
      CodeForKubeStatus(code, reason),
      absl::StrCat(std::string(what), ": ", code, reason.empty() ? "" : " ", reason,
                   message.empty() ? "" : ": ", message));
}

}  // namespace

absl::Status KubeError(std::string_view what, int http_status, std::string_view body) {
  absl::StatusOr<Value> parsed = ParseJson(body);
  if (parsed.ok() && StringAt(*parsed, {"kind"}) == "Status") {
    return FromStatusObject(what, http_status, *parsed, "");
  }
  constexpr size_t kShown = 200;
  const std::string_view shown = body.substr(0, kShown);
  return FromStatusObject(what, http_status, Value(), shown);
}

absl::Status WatchErrorStatus(std::string_view what, const Value& status_object) {
  // An ERROR event without a code is still an error: treat it as a server failure.
  int code = static_cast<int>(IntAt(status_object, {"code"}));
  if (code == 0) {
    code = 500;
  }
  return FromStatusObject(what, code, status_object, "watch ERROR event");
}

}  // namespace kmodd::kube

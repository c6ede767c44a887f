#include "common/http/status.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace kmodd::http {
namespace {

constexpr size_t kMaxBodyInMessage = 300;

// The body as one printable line, cut short: enough to see a registry's JSON error.
std::string BodyExcerpt(const std::string& body) {
  std::string out;
  for (char c : body.substr(0, kMaxBodyInMessage)) {
    out.push_back(absl::ascii_isprint(static_cast<unsigned char>(c)) ? c : ' ');
  }
  if (body.size() > kMaxBodyInMessage) {
    out += "...";
  }
  return std::string(absl::StripAsciiWhitespace(out));
}

}  // namespace

absl::StatusCode CodeForHttpStatus(int status) {
  if (status >= 200 && status < 300) {
    return absl::StatusCode::kOk;
  }
  switch (status) {
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
    case 410:
      return absl::StatusCode::kNotFound;
    case 408:
    case 429:
      return absl::StatusCode::kUnavailable;
    case 409:
    case 412:
      return absl::StatusCode::kFailedPrecondition;
    case 405:
    case 501:
    case 505:
      return absl::StatusCode::kUnimplemented;
    case 416:
      return absl::StatusCode::kOutOfRange;
    default:
      break;
  }
  if (status >= 500 && status < 600) {
    return absl::StatusCode::kUnavailable;
  }
  if (status >= 400 && status < 500) {
    return absl::StatusCode::kInvalidArgument;
  }
  return absl::StatusCode::kFailedPrecondition;
}

absl::Status StatusOf(const Response& response) {
  const absl::StatusCode code = CodeForHttpStatus(response.status);
  if (code == absl::StatusCode::kOk) {
    return absl::OkStatus();
  }
  Url shown = response.url;
  shown.target = shown.target.substr(0, shown.target.find('?'));
  std::string message = absl::StrCat(shown.ToString(), ": HTTP ", response.status);
  if (!response.reason.empty()) {
    absl::StrAppend(&message, " ", response.reason);
  }
  if (const std::string excerpt = BodyExcerpt(response.body); !excerpt.empty()) {
    absl::StrAppend(&message, ": ", excerpt);
  }
  return absl::Status(code, message);
}

}  // namespace kmodd::http

#pragma once

#include "absl/status/status.h"
#include "common/http/client.h"

namespace kmodd::http {

// What an HTTP status means to a caller that wanted a 2xx, by what it should do next:
//   2xx                       OK
//   408, 429, 500, 502-504    Unavailable (retry with backoff)
//   other 5xx                 Unavailable, except 501 and 505: Unimplemented
//   401                       Unauthenticated (get or refresh credentials)
//   403                       PermissionDenied
//   404, 410                  NotFound
//   416                       OutOfRange (a Range past the end: restart the download)
//   409, 412                  FailedPrecondition
//   405                       Unimplemented
//   other 4xx                 InvalidArgument (the request is wrong; retrying won't help)
//   1xx, 3xx (not followed)   FailedPrecondition
absl::StatusCode CodeForHttpStatus(int status);

// OK for a 2xx response; otherwise an error with that code whose message names the URL
// (without its query, which may hold signed credentials), the status, and the start of the
// body (registries explain errors there).
[[nodiscard]] absl::Status StatusOf(const Response& response);

}  // namespace kmodd::http

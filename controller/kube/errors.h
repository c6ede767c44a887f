#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "common/value.h"

namespace kmodd::kube {

// The code KubeClient reports for an HTTP status and a metav1.Status reason (see client.h).
absl::StatusCode CodeForKubeStatus(int http_status, std::string_view reason);

// An error from the API server's answer: `what` ("PATCH /api/v1/..."), the HTTP status, and
// the message of the metav1.Status in `body` when it holds one (else the start of the body).
absl::Status KubeError(std::string_view what, int http_status, std::string_view body);

// An ERROR watch event's object (a metav1.Status) as an error.
absl::Status WatchErrorStatus(std::string_view what, const Value& status_object);

}  // namespace kmodd::kube

#pragma once

// The Module admission webhook's decision, as a pure function of the AdmissionReview the
// API server sends (admission.k8s.io/v1): the same decoding and validation as
// `kmodd-controller validate`, every problem named by its field path. The HTTPS transport
// is in webhook_server.h.

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/value.h"

namespace kmodd::webhook {

// The AdmissionReview response for `review`: request.uid echoed; allowed, or denied with
// status.message listing each problem as "<field path>: <message>" ("; "-separated).
// Unknown fields come back as response.warnings. An UPDATE that leaves spec unchanged
// (finalizers, labels, status) is always allowed, so that a Module written under older
// rules can still be finalized. InvalidArgument when `review` is not an AdmissionReview
// v1 request (the server answers 400).
// A ModulePolicy (kmodd.io/v1alpha1, kind ModulePolicy) is checked by the same rules as
// in a modules directory (api/module_policy.h), on every CREATE and UPDATE.
[[nodiscard]] absl::StatusOr<Value> ReviewModule(const Value& review);

// The same on the HTTP body: JSON in, JSON out.
[[nodiscard]] absl::StatusOr<std::string> ReviewModuleJson(std::string_view body);

}  // namespace kmodd::webhook

#include "controller/webhook/webhook.h"

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json.h"
#include "api/decode.h"
#include "api/validate.h"

namespace kmodd::webhook {

namespace {

struct Decision {
  std::vector<std::string> problems;  // "path: message"
  std::vector<std::string> warnings;
};

std::string Problem(const std::string& path, const std::string& message) {
  return path.empty() ? message : absl::StrCat(path, ": ", message);
}

// Decodes one Module from an object of the review. The problems of decoding (a field of
// the wrong type) come back in `d`; nullopt when there is no Module to validate.
std::optional<api::Module> Decode(const Value& object, Decision* d) {
  api::Decoded decoded = api::DecodeDocuments(ToJson(object), "request");
  if (d != nullptr) {
    for (const auto& e : decoded.errors) {
      d->problems.push_back(Problem(e.path, e.message));
    }
    for (const auto& w : decoded.warnings) {
      d->warnings.push_back(Problem(w.path, w.message));
    }
  }
  if (decoded.modules.size() != 1) {
    if (d != nullptr && decoded.errors.empty()) {
      d->problems.emplace_back("the object is not a kmm.sigs.x-k8s.io/v1beta1 Module");
    }
    return std::nullopt;
  }
  return std::move(decoded.modules.front().object);
}

// A kmodd.io/v1alpha1 ModulePolicy: the decoder's rules and ValidateModulePolicy.
Decision DecidePolicy(const Value& object) {
  Decision d;
  api::Decoded decoded = api::DecodeDocuments(ToJson(object), "request");
  for (const auto& e : decoded.errors) {
    d.problems.push_back(Problem(e.path, e.message));
  }
  for (const auto& w : decoded.warnings) {
    d.warnings.push_back(Problem(w.path, w.message));
  }
  if (decoded.errors.empty() && decoded.policies.size() != 1) {
    d.problems.emplace_back("the object is not a kmodd.io/v1alpha1 ModulePolicy");
  }
  return d;
}

Decision Decide(const std::string& operation, const Value& object, const Value* old_object) {
  if (StringAt(object, {"kind"}) == "ModulePolicy") {
    return DecidePolicy(object);  // every change checked: it has no older rules to honour
  }
  Decision d;
  if (operation == "UPDATE" && old_object != nullptr) {
    const Value* spec = Lookup(object, {"spec"});
    const Value* old_spec = Lookup(*old_object, {"spec"});
    if (spec != nullptr && old_spec != nullptr && ToJsonLine(*spec) == ToJsonLine(*old_spec)) {
      return d;  // metadata or status only: never refused
    }
  }
  std::optional<api::Module> m = Decode(object, &d);
  if (!m) {
    return d;
  }
  std::optional<api::Module> old_m;
  if (operation == "UPDATE" && old_object != nullptr) {
    old_m = Decode(*old_object, nullptr);
  }
  const std::vector<api::FieldError> errors =
      old_m ? api::ValidateModuleUpdate(*old_m, *m) : api::ValidateModule(*m);
  for (const auto& e : errors) {
    d.problems.push_back(Problem(e.path, e.message));
  }
  return d;
}

}  // namespace

absl::StatusOr<Value> ReviewModule(const Value& review) {
  if (StringAt(review, {"apiVersion"}) != "admission.k8s.io/v1" ||
      StringAt(review, {"kind"}) != "AdmissionReview") {
    return absl::InvalidArgumentError("expected an admission.k8s.io/v1 AdmissionReview");
  }
  const Value* request = Lookup(review, {"request"});
  const std::string uid = request != nullptr ? StringAt(*request, {"uid"}) : "";
  if (uid.empty()) {
    return absl::InvalidArgumentError("the AdmissionReview has no request.uid");
  }
  const std::string operation = StringAt(*request, {"operation"});
  const Value* object = Lookup(*request, {"object"});
  const Value* old_object = Lookup(*request, {"oldObject"});
  if (old_object != nullptr && old_object->IsNull()) {
    old_object = nullptr;
  }

  Value response = Value::EmptyMap();
  response.Set("uid", uid);
  Decision d;
  if (operation == "CREATE" || operation == "UPDATE") {
    if (object == nullptr || !object->IsMap()) {
      d.problems.emplace_back("the request carries no object");
    } else {
      d = Decide(operation, *object, old_object);
    }
  }  // DELETE and CONNECT are not ours to refuse
  response.Set("allowed", d.problems.empty());
  if (!d.problems.empty()) {
    Value status = Value::EmptyMap();
    status.Set("code", 422);
    status.Set("reason", "Invalid");
    status.Set("message", absl::StrJoin(d.problems, "; "));
    response.Set("status", std::move(status));
  }
  if (!d.warnings.empty()) {
    Value warnings = Value::EmptyList();
    for (auto& w : d.warnings) {
      warnings.Append(std::move(w));
    }
    response.Set("warnings", std::move(warnings));
  }
  Value out = Value::EmptyMap();
  out.Set("apiVersion", "admission.k8s.io/v1");
  out.Set("kind", "AdmissionReview");
  out.Set("response", std::move(response));
  return out;
}

absl::StatusOr<std::string> ReviewModuleJson(std::string_view body) {
  absl::StatusOr<Value> review = ParseJson(body);
  if (!review.ok()) {
    return review.status();
  }
  absl::StatusOr<Value> out = ReviewModule(*review);
  if (!out.ok()) {
    return out.status();
  }
  return ToJsonLine(*out);
}

}  // namespace kmodd::webhook

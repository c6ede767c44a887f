#include "controller/kube_mode/pull_secret.h"

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace kmodd::source {

namespace {

constexpr char kKey[] = ".dockerconfigjson";
constexpr char kField[] = "data[\".dockerconfigjson\"]";  // as messages name it

// A key as a message shows it: escaped, and cut short (a status condition is no place for
// a hostile key of a hundred kilobytes).
std::string Shown(const std::string& key) {
  constexpr size_t kMax = 64;
  std::string out = absl::CHexEscape(key.substr(0, kMax));
  return key.size() > kMax ? absl::StrCat(out, "...") : out;
}

// "auths[\"r\"].auth: not base64"; without `where`, the message alone.
absl::Status Invalid(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(where, what));
}

// One auths entry, as the agent reads it: absent or null fields are not set.
absl::Status CheckEntry(const std::string& where, const Value& entry) {
  if (!entry.IsMap()) {
    return Invalid(where, absl::StrCat(": expected an object, got ", JsonTypeName(entry)));
  }
  for (const char* field : {"auth", "username", "password"}) {
    const Value* v = entry.Find(field);
    if (v != nullptr && !v->IsNull() && !v->IsString()) {
      return Invalid(where, absl::StrCat(".", field, ": expected a string, got ", JsonTypeName(*v)));
    }
  }
  const Value* auth = entry.Find("auth");
  if (auth == nullptr || !auth->IsString() || auth->AsString().empty()) {
    return absl::OkStatus();
  }
  std::string decoded;
  if (!absl::Base64Unescape(auth->AsString(), &decoded)) {
    return Invalid(where, ".auth: not base64");
  }
  if (decoded.find(':') == std::string::npos) {
    return Invalid(where, ".auth: must be base64 of user:password (no ':' in it)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckDockerConfig(std::string_view json) {
  if (json.size() > kMaxDockerConfigBytes) {
    return Invalid("", absl::StrCat(json.size(), " bytes, more than the ", kMaxDockerConfigBytes,
                                    " a pull secret may hold"));
  }
  absl::StatusOr<Value> root = ParseJson(json, kDockerConfigLimits);
  if (!root.ok()) {
    return Invalid("", absl::StrCat("not valid JSON: ", root.status().message()));
  }
  if (!root->IsMap()) {
    return Invalid("", absl::StrCat("expected a JSON object, got ", JsonTypeName(*root)));
  }
  const Value* auths = root->Find("auths");
  if (auths == nullptr || auths->IsNull()) {
    return Invalid("", "no \"auths\" object");
  }
  if (!auths->IsMap()) {
    return Invalid("auths", absl::StrCat(": expected an object, got ", JsonTypeName(*auths)));
  }
  // Every entry, not only those of the registries in use: the agent refuses the whole file
  // for one bad entry.
  for (const auto& [registry, entry] : auths->AsMap()) {
    if (absl::Status st = CheckEntry(absl::StrCat("auths[\"", Shown(registry), "\"]"), entry);
        !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> DockerConfigFromSecret(const Value& secret) {
  const std::string name = absl::StrCat(StringAt(secret, {"metadata", "namespace"}), "/",
                                        StringAt(secret, {"metadata", "name"}));
  const std::string type = StringAt(secret, {"type"});
  if (type != kDockerConfigJsonType) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Secret ", name, " is of type ", type.empty() ? std::string("Opaque") : type,
        ", not ", kDockerConfigJsonType, " (field type)"));
  }
  const Value* data = Lookup(secret, {"data", kKey});
  if (data == nullptr || !data->IsString() || data->AsString().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Secret ", name, " has no ", kField));
  }
  const std::string& encoded = data->AsString();
  // Checked before decoding: base64 takes 4 bytes for 3.
  if (encoded.size() / 4 * 3 > kMaxDockerConfigBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Secret ", name, ": ", kField, ": about ", encoded.size() / 4 * 3,
        " bytes, more than the ", kMaxDockerConfigBytes, " a pull secret may hold"));
  }
  std::string out;
  if (!absl::Base64Unescape(encoded, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Secret ", name, ": ", kField, ": not base64"));
  }
  if (absl::Status st = CheckDockerConfig(out); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("Secret ", name, ": ", kField, ": ", st.message()));
  }
  return out;
}

absl::StatusOr<std::string> SecretValue(const Value& secret, const std::string& key, size_t max_bytes) {
  const std::string name = absl::StrCat(StringAt(secret, {"metadata", "namespace"}), "/",
                                        StringAt(secret, {"metadata", "name"}));
  const std::string field = absl::StrCat("data[\"", Shown(key), "\"]");
  const Value* data = Lookup(secret, {"data", key});
  if (data == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("Secret ", name, " has no ", field));
  }
  if (!data->IsString()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Secret ", name, ": ", field, ": expected a string, got ", JsonTypeName(*data)));
  }
  const std::string& encoded = data->AsString();
  if (encoded.size() / 4 * 3 > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("Secret ", name, ": ", field, ": about ",
                                                   encoded.size() / 4 * 3, " bytes, more than ",
                                                   max_bytes));
  }
  std::string out;
  if (!absl::Base64Unescape(encoded, &out)) {
    return absl::InvalidArgumentError(absl::StrCat("Secret ", name, ": ", field, ": not base64"));
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("Secret ", name, ": ", field, ": empty"));
  }
  return out;
}

}  // namespace kmodd::source

// The registry's JSON documents: image manifests and indexes (OCI and Docker schema 2) and
// token-service answers, read with the strict JSON parser and checked field by field. They
// come from the network: a wrong shape is an error naming the field, never an exception on a
// pull thread.

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/oci/json_fields.h"
#include "common/oci/registry_client.h"

namespace kmodd::image {

namespace {

constexpr char kManifest[] = "manifest";

absl::StatusOr<Descriptor> ReadDescriptor(const Value& n, const std::string& where) {
  if (!n.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": expected a descriptor object, got ", JsonTypeName(n)));
  }
  Descriptor d;
  absl::StatusOr<std::string> media_type = OptionalString(n, "mediaType", where);
  absl::StatusOr<std::string> digest = RequiredString(n, "digest", where);
  absl::StatusOr<int64_t> size = RequiredInt(n, "size", where);
  for (const absl::Status& s : {media_type.status(), digest.status(), size.status()}) {
    if (!s.ok()) {
      return s;
    }
  }
  d.media_type = *media_type;
  d.digest = *digest;
  d.size = *size;
  if (!IsDigest(d.digest) || d.size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " has an unsupported digest or size (sha256 only)"));
  }
  return d;
}

// "os/architecture" of index entry `m`, or "" when it names no platform (the field is
// optional in the OCI image spec).
absl::StatusOr<std::string> PlatformOf(const Value& m, const std::string& where) {
  absl::StatusOr<const Value*> p = OptionalObject(m, "platform", where);
  if (!p.ok()) {
    return p.status();
  }
  if (*p == nullptr) {
    return std::string();
  }
  const std::string at = where + ".platform";
  absl::StatusOr<std::string> os = OptionalString(**p, "os", at);
  if (!os.ok()) {
    return os.status();
  }
  absl::StatusOr<std::string> arch = OptionalString(**p, "architecture", at);
  if (!arch.ok()) {
    return arch.status();
  }
  return absl::StrCat(*os, "/", *arch);
}

// An index picks the entry that names the node's platform. An entry without a platform is
// never picked: nothing says what it runs on (containerd would read its config to find
// out; an index of driver images names its platforms), and it is listed as such when no
// entry fits.
absl::StatusOr<ParsedManifest> ChooseFromIndex(const Value& root, const Platform& platform) {
  absl::StatusOr<const Value*> list = OptionalList(root, "manifests", kManifest);
  if (!list.ok()) {
    return list.status();
  }
  if (*list == nullptr) {
    return absl::InvalidArgumentError("manifest: an index without \"manifests\"");
  }
  const std::string want = absl::StrCat(platform.os, "/", platform.architecture);
  std::vector<std::string> seen;
  for (size_t i = 0; i < (*list)->AsList().size(); ++i) {
    const Value& m = (*list)->AsList()[i];
    const std::string where = absl::StrCat("manifest: manifests[", i, "]");
    if (!m.IsMap()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected an object, got ", JsonTypeName(m)));
    }
    absl::StatusOr<std::string> p = PlatformOf(m, where);
    if (!p.ok()) {
      return p.status();
    }
    seen.push_back(p->empty() ? absl::StrCat("manifests[", i, "] without a platform") : *p);
    if (*p == want) {
      absl::StatusOr<Descriptor> d = ReadDescriptor(m, where);
      if (!d.ok()) {
        return d.status();
      }
      ParsedManifest out;
      out.chosen = *d;
      return out;
    }
  }
  return absl::NotFoundError(absl::StrCat("the image index has no ", want, " manifest (it has: ",
                                          seen.empty() ? "nothing" : absl::StrJoin(seen, ", "),
                                          ")"));
}

}  // namespace

absl::StatusOr<ParsedManifest> ParseManifest(const std::string& body, const std::string& media_type,
                                             const Platform& platform) {
  absl::StatusOr<Value> root = ParseObject(body, kManifest);
  if (!root.ok()) {
    return root.status();
  }
  std::string type = media_type;
  if (type.empty() || type == "application/json") {
    absl::StatusOr<std::string> declared = OptionalString(*root, "mediaType", kManifest);
    if (!declared.ok()) {
      return declared.status();
    }
    type = *declared;
    if (type.empty()) {  // OCI allows omitting it
      type = root->Find("manifests") != nullptr ? kOciIndex : kOciManifest;
    }
  }
  if (type == kOciIndex || type == kDockerList) {
    return ChooseFromIndex(*root, platform);
  }
  if (type != kOciManifest && type != kDockerManifest) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unsupported manifest media type \"", type, "\" (Docker schema 1 is not supported)"));
  }
  ParsedManifest out;
  out.image.media_type = type;
  const Value* config = root->Find("config");
  if (config == nullptr) {
    return absl::InvalidArgumentError("manifest: .config: required, missing");
  }
  absl::StatusOr<Descriptor> c = ReadDescriptor(*config, "manifest: config");
  if (!c.ok()) {
    return c.status();
  }
  out.image.config = *c;
  absl::StatusOr<const Value*> layers = OptionalList(*root, "layers", kManifest);
  if (!layers.ok()) {
    return layers.status();
  }
  if (*layers == nullptr || (*layers)->AsList().empty()) {
    return absl::InvalidArgumentError("manifest has no layers");
  }
  for (size_t i = 0; i < (*layers)->AsList().size(); ++i) {
    absl::StatusOr<Descriptor> d =
        ReadDescriptor((*layers)->AsList()[i], absl::StrCat("manifest: layers[", i, "]"));
    if (!d.ok()) {
      return d.status();
    }
    out.image.layers.push_back(*d);
  }
  return out;
}

absl::StatusOr<std::string> ParseTokenResponse(const std::string& body, const std::string& realm) {
  const std::string doc = absl::StrCat("token service ", realm, " answer");
  absl::StatusOr<Value> root = ParseObject(body, doc);
  if (!root.ok()) {
    return absl::UnauthenticatedError(root.status().message());
  }
  // Docker's token spec names it "token"; OAuth2 answers "access_token": either will do.
  for (const char* key : {"token", "access_token"}) {
    absl::StatusOr<std::string> token = OptionalString(*root, key, doc);
    if (!token.ok()) {
      return absl::UnauthenticatedError(token.status().message());
    }
    if (!token->empty()) {
      return token;
    }
  }
  return absl::UnauthenticatedError(absl::StrCat("token service ", realm, " returned no token"));
}

}  // namespace kmodd::image

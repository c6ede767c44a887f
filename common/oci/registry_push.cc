// Push, as the OCI Distribution spec has it: HEAD for a blob the repository may hold, a
// cross-repository mount, an upload session (POST) fed by PATCH chunks or one PUT, and the
// manifest PUT last. The registry_client.cc half pulls.

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/http/status.h"
#include "common/http/url.h"
#include "common/oci/registry_client.h"
#include "common/oci/sha256.h"

namespace kmodd::image {

namespace {

// How many times a chunked upload asks the session where it stands and resumes.
constexpr int kMaxResumes = 4;

std::string Short(const std::string& digest) { return digest.substr(0, 19); }

}  // namespace

absl::Status RegistryClient::PushFailed(const ImageRef& ref, const std::string& what,
                                        const http::Response& resp) const {
  if (resp.status == 401 || resp.status == 403) {
    return Refused(ref, resp);
  }
  const absl::Status s = http::StatusOf(resp);
  return absl::Status(s.ok() ? absl::StatusCode::kUnknown : s.code(),
                      absl::StrCat("pushing ", what, " to ", ref.ApiHost(), "/", ref.repository,
                                   ": HTTP ", resp.status, " ", s.message()));
}

absl::StatusOr<std::string> RegistryClient::UploadLocation(const ImageRef& ref,
                                                           const http::Response& resp,
                                                           const std::string& base) const {
  const std::optional<std::string> location = resp.headers.Get("Location");
  if (!location || location->empty()) {
    return absl::UnknownError(absl::StrCat("registry ", ref.ApiHost(), " answered HTTP ",
                                           resp.status, " to an upload without a Location"));
  }
  absl::StatusOr<http::Url> from = http::ParseUrl(base);
  if (!from.ok()) {
    return from.status();
  }
  absl::StatusOr<http::Url> to = http::ResolveLocation(*from, *location);
  if (!to.ok()) {
    return absl::UnknownError(absl::StrCat("registry ", ref.ApiHost(),
                                           " named a bad upload location: ", to.status().message()));
  }
  // The push credential goes with every request of the session: never to another server,
  // and never from HTTPS down to HTTP.
  if (to->Authority() != from->Authority() || to->scheme != from->scheme) {
    return absl::FailedPreconditionError(absl::StrCat(
        "registry ", ref.ApiHost(), " moved the upload to ", to->scheme, "://", to->Authority(),
        ": kmodd uploads only to the registry's own host, where its credentials go"));
  }
  return to->ToString();
}

absl::StatusOr<int64_t> RegistryClient::UploadOffset(const ImageRef& ref, const std::string& location) {
  http::Request req;
  req.url = location;
  auto resp = Send(ref, req, nullptr);
  if (!resp.ok()) {
    return resp.status();
  }
  if (resp->status != 204 && resp->status != 200) {
    return PushFailed(ref, "an upload session's status", *resp);
  }
  // "Range: 0-N" (bytes 0..N held), or none yet ("0-0" from some registries means one byte
  // by the letter of it; distribution sends "0-0" only after a first byte too).
  const std::string range = resp->headers.Get("Range").value_or("");
  const size_t dash = range.find('-');
  int64_t last = -1;
  if (dash == std::string::npos || !absl::SimpleAtoi(range.substr(dash + 1), &last) || last < 0) {
    return 0;
  }
  return last + 1;
}

absl::StatusOr<RegistryClient::BlobPush> RegistryClient::PushBlob(const ImageRef& ref,
                                                                  std::string_view data,
                                                                  const std::string& digest,
                                                                  const PushBlobOptions& options) {
  if (!IsDigest(digest)) {
    return absl::InvalidArgumentError(absl::StrCat("blob digest \"", digest, "\" is not sha256:<64 hex>"));
  }
  if (const std::string got = Sha256::Of(data); got != digest) {
    return absl::InvalidArgumentError(
        absl::StrCat("blob ", digest, ": the data's digest is ", got, "; nothing was pushed"));
  }
  const std::string what = absl::StrCat("blob ", Short(digest));
  {
    http::Request head;
    head.method = "HEAD";
    head.url = Url(ref, "/blobs/" + digest);
    auto resp = Send(ref, head, nullptr);
    if (!resp.ok()) {
      return resp.status();
    }
    if (resp->status == 200) {
      return BlobPush::kPresent;
    }
    // 404: not there. 401/403 after the challenge: pushing will say so with the reason.
  }
  http::Request start;
  start.method = "POST";
  start.url = Url(ref, "/blobs/uploads/");
  if (!options.mount_from.empty() && options.mount_from != ref.repository) {
    absl::StrAppend(&start.url, "?mount=", digest, "&from=", options.mount_from);
  }
  auto opened = Send(ref, start, nullptr);
  if (!opened.ok()) {
    return opened.status();
  }
  if (opened->status == 201 && !options.mount_from.empty()) {
    return BlobPush::kMounted;
  }
  if (opened->status != 202) {
    return PushFailed(ref, what, *opened);
  }
  absl::StatusOr<std::string> location = UploadLocation(ref, *opened, start.url);
  if (!location.ok()) {
    return location.status();
  }
  int64_t offset = 0;
  const auto size = static_cast<int64_t>(data.size());
  int resumes = 0;
  if (options.chunk_bytes > 0) {
    while (offset < size) {
      const int64_t n = std::min<int64_t>(static_cast<int64_t>(options.chunk_bytes), size - offset);
      http::Request patch;
      patch.method = "PATCH";
      patch.url = *location;
      patch.headers.Set("Content-Type", "application/octet-stream");
      patch.headers.Set("Content-Range", absl::StrCat(offset, "-", offset + n - 1));
      patch.body.assign(data.substr(static_cast<size_t>(offset), static_cast<size_t>(n)));
      auto resp = Send(ref, patch, nullptr);
      if (resp.ok() && resp->status == 202) {
        blob_bytes_sent_ += n;
        offset += n;
        absl::StatusOr<std::string> next = UploadLocation(ref, *resp, *location);
        if (!next.ok()) {
          return next.status();
        }
        location = std::move(next);
        continue;
      }
      const bool resumable = !resp.ok() ? absl::IsUnavailable(resp.status()) : resp->status == 416;
      if (!resumable || ++resumes > kMaxResumes) {
        return resp.ok() ? PushFailed(ref, what, *resp) : resp.status();
      }
      // Where the session stands: the registry may hold part of this chunk, or all of it.
      absl::StatusOr<int64_t> held = UploadOffset(ref, *location);
      if (!held.ok()) {
        return held.status();
      }
      if (*held > size) {
        return absl::DataLossError(absl::StrCat("pushing ", what, ": the registry holds ", *held,
                                                " bytes of a ", size, "-byte blob"));
      }
      offset = *held;
    }
  }
  http::Request put;
  put.method = "PUT";
  put.url = absl::StrCat(*location, location->find('?') == std::string::npos ? "?" : "&",
                         "digest=", digest);
  put.headers.Set("Content-Type", "application/octet-stream");
  if (offset < size) {
    put.body.assign(data.substr(static_cast<size_t>(offset)));
  }
  auto done = Send(ref, put, nullptr);
  if (!done.ok()) {
    return done.status();
  }
  if (done->status != 201) {
    return PushFailed(ref, what, *done);
  }
  blob_bytes_sent_ += size - offset;
  if (auto said = done->headers.Get("Docker-Content-Digest"); said && !said->empty() && *said != digest) {
    return absl::DataLossError(absl::StrCat("pushing ", what, ": the registry stored it as ", *said));
  }
  return BlobPush::kUploaded;
}

absl::StatusOr<std::optional<RegistryClient::BlobPush>> RegistryClient::MountBlob(
    const ImageRef& ref, const std::string& digest, const std::string& from) {
  if (!IsDigest(digest)) {
    return absl::InvalidArgumentError(absl::StrCat("blob digest \"", digest, "\" is not sha256:<64 hex>"));
  }
  http::Request head;
  head.method = "HEAD";
  head.url = Url(ref, "/blobs/" + digest);
  auto there = Send(ref, head, nullptr);
  if (!there.ok()) {
    return there.status();
  }
  if (there->status == 200) {
    return BlobPush::kPresent;
  }
  if (from.empty() || from == ref.repository) {
    return std::nullopt;
  }
  http::Request start;
  start.method = "POST";
  start.url = absl::StrCat(Url(ref, "/blobs/uploads/"), "?mount=", digest, "&from=", from);
  auto opened = Send(ref, start, nullptr);
  if (!opened.ok()) {
    return opened.status();
  }
  if (opened->status == 201) {
    return BlobPush::kMounted;
  }
  if (opened->status != 202) {
    return PushFailed(ref, absl::StrCat("a mount of blob ", Short(digest)), *opened);
  }
  // Not mounted (no access to `from`, or the registry does not mount): the session it
  // opened is closed so that it does not linger; a failure to close it changes nothing.
  if (absl::StatusOr<std::string> location = UploadLocation(ref, *opened, start.url); location.ok()) {
    http::Request cancel;
    cancel.method = "DELETE";
    cancel.url = *location;
    (void)Send(ref, cancel, nullptr);
  }
  return std::nullopt;
}

absl::StatusOr<std::string> RegistryClient::PushManifest(const ImageRef& ref,
                                                         const std::string& media_type,
                                                         const std::string& body) {
  const std::string digest = Sha256::Of(body);
  if (!ref.digest.empty() && ref.digest != digest) {
    return absl::InvalidArgumentError(absl::StrCat("manifest for ", ref.ToString(), ": its digest is ",
                                                   digest, "; nothing was pushed"));
  }
  if (ref.digest.empty() && ref.tag.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("manifest for ", ref.ToString(), ": no tag to push to"));
  }
  http::Request put;
  put.method = "PUT";
  put.url = Url(ref, "/manifests/" + ref.Reference());
  put.headers.Set("Content-Type", media_type);
  put.body = body;
  auto resp = Send(ref, put, nullptr);
  if (!resp.ok()) {
    return resp.status();
  }
  if (resp->status != 201) {
    return PushFailed(ref, absl::StrCat("manifest ", ref.ToString()), *resp);
  }
  if (auto said = resp->headers.Get("Docker-Content-Digest"); said && !said->empty() && *said != digest) {
    return absl::DataLossError(absl::StrCat("pushing manifest ", ref.ToString(),
                                            ": the registry stored it as ", *said, ", not ", digest));
  }
  return digest;
}

}  // namespace kmodd::image

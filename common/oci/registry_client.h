#pragma once

// An OCI Distribution client: resolves a reference to an image manifest (content
// negotiation over OCI and Docker manifests and indexes, picking the node's platform),
// streams blobs with their digest and size verified as they arrive, and pushes (blob
// upload, monolithic or chunked, cross-repository mount, manifest put). Auth: anonymous, basic,
// and the bearer-token challenge flow. Retries with capped, jittered backoff; an
// interrupted blob resumes with a Range request.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/http/client.h"
#include "common/oci/pull_secret.h"
#include "common/oci/reference.h"

namespace kmodd::image {

inline constexpr char kOciIndex[] = "application/vnd.oci.image.index.v1+json";
inline constexpr char kOciManifest[] = "application/vnd.oci.image.manifest.v1+json";
inline constexpr char kDockerList[] = "application/vnd.docker.distribution.manifest.list.v2+json";
inline constexpr char kDockerManifest[] = "application/vnd.docker.distribution.manifest.v2+json";

struct Descriptor {
  std::string media_type;
  std::string digest;
  int64_t size = 0;
};

// The architecture this agent was built for, in GOARCH spelling (image indexes use it):
// the node's own, since the agent runs natively.
#if defined(__x86_64__)
inline constexpr char kHostArchitecture[] = "amd64";
#elif defined(__aarch64__)
inline constexpr char kHostArchitecture[] = "arm64";
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
inline constexpr char kHostArchitecture[] = "ppc64le";
#elif defined(__s390x__)
inline constexpr char kHostArchitecture[] = "s390x";
#elif defined(__riscv) && __riscv_xlen == 64
inline constexpr char kHostArchitecture[] = "riscv64";
#else
#error "unknown architecture: add its GOARCH name here"
#endif

struct Platform {
  std::string os = "linux";
  std::string architecture = kHostArchitecture;
};

struct ResolvedImage {
  std::string manifest_digest;  // of the image manifest (after choosing a platform)
  std::string media_type;
  Descriptor config;
  std::vector<Descriptor> layers;
};

// Parses an image manifest (OCI or Docker schema 2) or, for an index, returns the
// descriptor of `platform`'s manifest in `chosen`. Pure; used for registries and OCI layouts.
struct ParsedManifest {
  std::optional<Descriptor> chosen;  // set when the document was an index
  ResolvedImage image;               // set when it was a manifest (digest left empty)
};
[[nodiscard]] absl::StatusOr<ParsedManifest> ParseManifest(const std::string& body,
                                                           const std::string& media_type,
                                                           const Platform& platform);

// The bearer token in a token service's answer ({"token": ...} or {"access_token": ...}).
// Unauthenticated, naming `realm` and the field, when there is none or the answer is malformed.
[[nodiscard]] absl::StatusOr<std::string> ParseTokenResponse(const std::string& body,
                                                             const std::string& realm);

struct RegistryOptions {
  bool plain_http = false;        // KMM registryTLS.insecure: the registry speaks HTTP
  bool skip_tls_verify = false;   // KMM registryTLS.insecureSkipTLSVerify
  std::string ca_file;            // extra CAs to trust (PEM), beside the system's
  std::optional<Credentials> credentials;
  int attempts = 4;  // per request, for retryable failures
  std::chrono::milliseconds backoff = std::chrono::milliseconds(200);
};

class RegistryClient {
 public:
  RegistryClient(http::HttpClient& http, RegistryOptions options);

  [[nodiscard]] absl::StatusOr<ResolvedImage> Resolve(const ImageRef& ref, const Platform& p);

  // Streams the blob to `on_data`, verifying size and digest; `on_data` never sees a byte
  // twice, even across a resumed transfer. `progress` (optional) counts bytes received.
  [[nodiscard]] absl::Status FetchBlob(const ImageRef& ref, const Descriptor& blob,
                                       const std::function<absl::Status(const char*, size_t)>& on_data,
                                       std::atomic<int64_t>* progress = nullptr);

  // Bytes of blob data received over the network by this client (for tests and figures).
  int64_t blob_bytes_received() const { return blob_bytes_; }

  // --- push (registry_push.cc): the Distribution spec's blob upload and manifest put ---

  // How PushBlob put the blob in the repository.
  enum class BlobPush { kPresent, kMounted, kUploaded };
  struct PushBlobOptions {
    // Upload in PATCH chunks of at most this many bytes, then a closing PUT; 0: the whole
    // blob in the closing PUT (monolithic).
    size_t chunk_bytes = 0;
    // A repository of the same registry that has the blob: asked to mount it from there
    // first (no bytes sent when the registry does). Empty: no mount.
    std::string mount_from;
  };
  // Makes `data` blob `digest` of ref's repository: nothing sent when the repository has it
  // already. `digest` must be the data's (checked before anything is sent), and the
  // registry's answer must name it. A chunk the registry did not take (a cut connection, a
  // 416) resumes from the offset the upload session reports.
  [[nodiscard]] absl::StatusOr<BlobPush> PushBlob(const ImageRef& ref, std::string_view data,
                                                  const std::string& digest,
                                                  const PushBlobOptions& options);
  // Blob `digest` into ref's repository without its bytes: kPresent when the repository has
  // it, kMounted when the registry mounted it from repository `from` (same registry);
  // nullopt when it did neither (the upload session it opened instead is cancelled): the
  // caller then fetches and pushes the bytes.
  [[nodiscard]] absl::StatusOr<std::optional<BlobPush>> MountBlob(const ImageRef& ref,
                                                                  const std::string& digest,
                                                                  const std::string& from);
  // Puts `body` (of `media_type`) as ref's tag, or as its digest when it has one (which must
  // then be the body's); every blob it names must be pushed first. Returns the manifest's
  // digest, checked against the registry's Docker-Content-Digest.
  [[nodiscard]] absl::StatusOr<std::string> PushManifest(const ImageRef& ref,
                                                         const std::string& media_type,
                                                         const std::string& body);
  // Bytes of blob data sent by this client (for tests and figures).
  int64_t blob_bytes_sent() const { return blob_bytes_sent_; }

 private:
  std::string Url(const ImageRef& ref, const std::string& path) const;
  // Sends with auth (answering a 401 challenge once), retrying retryable failures.
  absl::StatusOr<http::Response> Send(const ImageRef& ref, http::Request req,
                                      const http::BodyHandler* handler);
  absl::Status Authorize(const ImageRef& ref, const http::Response& challenge);
  // OK when the pull secret's credentials may go to the token `realm` a 401 named: over
  // verified HTTPS, or to the registry's own host when it is configured insecure. Never to
  // another host in clear: a registry (or whoever answers for it over HTTP) names the realm.
  absl::Status CheckRealm(const ImageRef& ref, const std::string& realm) const;
  // A 401 or 403 left after authorizing: the registry refused the pull (Unauthenticated).
  absl::Status Refused(const ImageRef& ref, const http::Response& resp) const;
  absl::StatusOr<std::pair<std::string, std::string>> GetManifest(const ImageRef& ref,
                                                                  const std::string& reference);
  // Push helpers (registry_push.cc): an upload session's next URL from its Location, which
  // must stay on the registry's host (the credentials go with it); the offset the registry
  // holds for a session.
  absl::StatusOr<std::string> UploadLocation(const ImageRef& ref, const http::Response& resp,
                                             const std::string& base) const;
  absl::StatusOr<int64_t> UploadOffset(const ImageRef& ref, const std::string& location);
  // A push request refused or failed: the status, naming what was pushed and where.
  absl::Status PushFailed(const ImageRef& ref, const std::string& what, const http::Response& resp) const;

  http::HttpClient& http_;
  RegistryOptions options_;
  std::map<std::string, std::string> authorization_;  // registry/repository -> header value
  int64_t blob_bytes_ = 0;
  int64_t blob_bytes_sent_ = 0;
};

}  // namespace kmodd::image

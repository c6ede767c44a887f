#pragma once

// The agent's image cache (default /var/lib/kmodd/images): extracted driver trees
// addressed by manifest digest (and by which parts of the image were kept), plus a record
// of which digest each reference resolved to.
//
//  - Applying the same digest again downloads nothing but the manifest; with
//    imagePullPolicy IfNotPresent (or a digest-pinned reference) not even that.
//  - Blobs are streamed straight into the layer applier while their digest is verified:
//    no compressed layer is written to disk.
//  - Concurrent pulls of one image share one download.
//  - A tree appears only complete (staging directory + rename), so kill -9 never leaves a
//    half-written entry that a later pull would use; leftovers are removed by Prune.

#include <atomic>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/http/client.h"
#include "node-agent/image/layer_limits.h"
#include "common/oci/registry_client.h"

namespace kmodd::image {

struct PullRequest {
  // An OCI reference (registry/repo:tag[@digest]) or oci-layout:PATH[:TAG] (air-gapped).
  std::string image;
  std::string pull_policy;  // Always, IfNotPresent (default), Never
  // Paths in the image to extract ("opt/lib/modules/<kernel>/", "firmware/").
  std::vector<std::string> keep_prefixes;
  RegistryOptions registry;
  Platform platform;
};

struct PulledImage {
  std::string root;             // the extracted tree
  std::string manifest_digest;
  bool resolved_remotely = false;  // a manifest was fetched
  int64_t blob_bytes = 0;          // blob bytes downloaded for this pull
};

struct Progress {
  std::atomic<int64_t> done{0};
  std::atomic<int64_t> total{0};
};

struct CacheEntry {
  std::string tree;  // directory name under trees/
  std::string path;
  std::vector<std::string> references;  // references that resolved to it
};

class ImageCache {
 public:
  // `http` builds the client for a pull (TLS options differ per registry).
  using HttpFactory =
      std::function<absl::StatusOr<std::unique_ptr<http::HttpClient>>(const RegistryOptions&)>;

  ImageCache(std::string root, HttpFactory http, Limits limits = {});

  [[nodiscard]] absl::StatusOr<PulledImage> Pull(const PullRequest& req);

  // Bytes done and total of the pulls in flight, by image.
  std::map<std::string, std::pair<int64_t, int64_t>> InFlight() const;

  [[nodiscard]] absl::StatusOr<std::vector<CacheEntry>> List() const;
  // Removes every tree not in `keep` (paths as returned in PulledImage::root), their
  // reference records, and any staging leftovers. Returns the removed paths.
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> Prune(const std::set<std::string>& keep);

 private:
  absl::StatusOr<PulledImage> DoPull(const PullRequest& req, Progress& progress);
  absl::StatusOr<PulledImage> PullRemote(const PullRequest& req, Progress& progress);
  absl::StatusOr<PulledImage> PullLayout(const PullRequest& req, Progress& progress);
  std::string TreeDir(const std::string& manifest_digest, const std::vector<std::string>& keep) const;
  std::string RefFile(const PullRequest& req) const;

  std::string root_;
  HttpFactory http_;
  Limits limits_;
  mutable std::mutex mu_;
  struct Flight {
    std::shared_future<absl::StatusOr<PulledImage>> result;
    std::shared_ptr<Progress> progress;
  };
  std::map<std::string, Flight> inflight_;
};

}  // namespace kmodd::image

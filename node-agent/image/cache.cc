#include "node-agent/image/cache.h"

#include <filesystem>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file.h"
#include "common/json.h"
#include "common/value.h"
#include "common/oci/decompressor.h"
#include "common/oci/json_fields.h"
#include "node-agent/image/layer_applier.h"
#include "common/oci/sha256.h"

namespace kmodd::image {

namespace fs = std::filesystem;

namespace {

constexpr char kLayoutPrefix[] = "oci-layout:";

std::string Hex(const std::string& digest) { return digest.substr(digest.find(':') + 1); }

// A string field of one of our own ref records ({"image", "digest", "tree"}); "" for a
// damaged record, which the next pull rewrites.
std::string RecordField(const std::string& text, std::string_view key) {
  absl::StatusOr<Value> record = ParseJson(text, kRegistryJsonLimits);
  return record.ok() ? StringAt(*record, {key}) : std::string();
}

// The digest of the manifest `tag` names in an OCI layout's index.json (the only one when
// `tag` is empty), or "" when none does.
absl::StatusOr<std::string> LayoutManifest(const std::string& text, const std::string& where,
                                           const std::string& tag) {
  absl::StatusOr<Value> index = ParseObject(text, where);
  if (!index.ok()) {
    return index.status();
  }
  absl::StatusOr<const Value*> manifests = OptionalList(*index, "manifests", where);
  if (!manifests.ok()) {
    return manifests.status();
  }
  if (*manifests == nullptr) {
    return std::string();
  }
  const Value::List& list = (*manifests)->AsList();
  std::string digest;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = absl::StrCat(where, ": manifests[", i, "]");
    if (!list[i].IsMap()) {
      return absl::InvalidArgumentError(absl::StrCat(at, ": expected an object, got ",
                                                     JsonTypeName(list[i])));
    }
    absl::StatusOr<const Value*> annotations = OptionalObject(list[i], "annotations", at);
    if (!annotations.ok()) {
      return annotations.status();
    }
    absl::StatusOr<std::string> name =
        *annotations == nullptr
            ? std::string()
            : OptionalString(**annotations, "org.opencontainers.image.ref.name", at + ".annotations");
    if (!name.ok()) {
      return name.status();
    }
    if (tag.empty() ? list.size() == 1 : *name == tag) {
      absl::StatusOr<std::string> d = RequiredString(list[i], "digest", at);
      if (!d.ok()) {
        return d.status();
      }
      digest = *d;
    }
  }
  return digest;
}

// Applies every layer of `image`, fetching each blob with `fetch`, into `dir`.
absl::Status ApplyLayers(
    const std::string& dir, const Limits& limits, const std::vector<std::string>& keep,
    const ResolvedImage& image,
    const std::function<absl::Status(const Descriptor&,
                                     const std::function<absl::Status(const char*, size_t)>&)>&
        fetch) {
  auto applier = LayerApplier::Begin(dir, limits, keep);
  if (!applier.ok()) {
    return applier.status();
  }
  for (const auto& layer : image.layers) {
    auto compression = LayerCompression(layer.media_type);
    if (!compression.ok()) {
      return compression.status();
    }
    auto sink = applier->StartLayer(layer.digest, *compression);
    if (!sink.ok()) {
      return sink.status();
    }
    LayerSink* s = sink->get();
    if (auto st = fetch(layer, [s](const char* d, size_t n) { return s->Write(d, n); }); !st.ok()) {
      return st;
    }
    if (auto st = s->Finish(); !st.ok()) {
      return st;
    }
  }
  auto committed = applier->Commit();
  if (absl::IsAlreadyExists(committed)) {
    return absl::OkStatus();  // another pull of the same digest finished first
  }
  return committed;
}

}  // namespace

ImageCache::ImageCache(std::string root, HttpFactory http, Limits limits)
    : root_(std::move(root)), http_(std::move(http)), limits_(limits) {}

std::string ImageCache::TreeDir(const std::string& manifest_digest,
                                const std::vector<std::string>& keep) const {
  // The same image extracted with another filter (another kernel) is another tree.
  const std::string filter = Hex(Sha256::Of(absl::StrJoin(keep, "\n"))).substr(0, 12);
  return absl::StrCat(root_, "/trees/", Hex(manifest_digest).substr(0, 32), "-", filter);
}

std::string ImageCache::RefFile(const PullRequest& req) const {
  return absl::StrCat(root_, "/refs/",
                      Hex(Sha256::Of(req.image + "\n" + absl::StrJoin(req.keep_prefixes, "\n") +
                                     "\n" + req.platform.os + "/" + req.platform.architecture)),
                      ".json");
}

absl::StatusOr<PulledImage> ImageCache::Pull(const PullRequest& req) {
  const std::string key = req.image + "|" + absl::StrJoin(req.keep_prefixes, ",");
  std::shared_future<absl::StatusOr<PulledImage>> result;
  std::shared_ptr<Progress> progress;
  std::promise<absl::StatusOr<PulledImage>> promise;
  bool leader = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = inflight_.find(key); it != inflight_.end()) {
      result = it->second.result;  // someone is already pulling this image: wait for them
    } else {
      leader = true;
      progress = std::make_shared<Progress>();
      result = promise.get_future().share();
      inflight_[key] = Flight{result, progress};
    }
  }
  if (leader) {
    promise.set_value(DoPull(req, *progress));
    std::lock_guard<std::mutex> lock(mu_);
    inflight_.erase(key);
  }
  return result.get();
}

std::map<std::string, std::pair<int64_t, int64_t>> ImageCache::InFlight() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, std::pair<int64_t, int64_t>> out;
  for (const auto& [key, f] : inflight_) {
    out[key.substr(0, key.find('|'))] = {f.progress->done.load(), f.progress->total.load()};
  }
  return out;
}

absl::StatusOr<PulledImage> ImageCache::DoPull(const PullRequest& req, Progress& progress) {
  std::error_code ec;
  fs::create_directories(root_ + "/trees", ec);
  fs::create_directories(root_ + "/refs", ec);
  if (ec) {
    return ErrnoStatus(ec.value(), "cannot create image cache", root_);
  }
  const std::string policy = req.pull_policy.empty() ? "IfNotPresent" : req.pull_policy;
  if (policy != "Always" && policy != "IfNotPresent" && policy != "Never") {
    return absl::InvalidArgumentError(absl::StrCat(
        "imagePullPolicy \"", policy, "\": expected Always, IfNotPresent or Never"));
  }
  if (policy != "Always") {
    if (auto text = ReadFile(RefFile(req)); text.ok()) {
      // A damaged record is ignored: the pull below rewrites it.
      const std::string digest = RecordField(*text, "digest");
      const std::string tree = TreeDir(digest, req.keep_prefixes);
      if (IsDigest(digest) && fs::is_directory(tree, ec)) {
        return PulledImage{tree, digest, false, 0};
      }
    }
    if (policy == "Never") {
      return absl::FailedPreconditionError(absl::StrCat(
          "image ", req.image, " is not in the cache and imagePullPolicy is Never"));
    }
  }
  auto pulled = req.image.rfind(kLayoutPrefix, 0) == 0 ? PullLayout(req, progress)
                                                       : PullRemote(req, progress);
  if (!pulled.ok()) {
    return pulled.status();
  }
  Value record = Value::EmptyMap();
  record.Set("image", req.image);
  record.Set("digest", pulled->manifest_digest);
  record.Set("tree", pulled->root);
  if (auto s = WriteFileAtomic(RefFile(req), ToJson(record)); !s.ok()) {
    return s;
  }
  return pulled;
}

absl::StatusOr<PulledImage> ImageCache::PullRemote(const PullRequest& req, Progress& progress) {
  auto ref = ParseImageRef(req.image);
  if (!ref.ok()) {
    return ref.status();
  }
  auto http = http_(req.registry);
  if (!http.ok()) {
    return http.status();
  }
  RegistryClient client(**http, req.registry);
  auto image = client.Resolve(*ref, req.platform);
  if (!image.ok()) {
    return image.status();
  }
  const std::string tree = TreeDir(image->manifest_digest, req.keep_prefixes);
  std::error_code ec;
  if (fs::is_directory(tree, ec)) {
    return PulledImage{tree, image->manifest_digest, true, 0};
  }
  for (const auto& l : image->layers) {
    progress.total += l.size;
  }
  auto applied = ApplyLayers(tree, limits_, req.keep_prefixes, *image,
                             [&](const Descriptor& d, const auto& sink) {
                               return client.FetchBlob(*ref, d, sink, &progress.done);
                             });
  if (!applied.ok()) {
    return absl::Status(applied.code(), absl::StrCat(req.image, ": ", applied.message()));
  }
  return PulledImage{tree, image->manifest_digest, true, client.blob_bytes_received()};
}

// oci-layout:PATH[:TAG]: an OCI image layout directory on the node (index.json and
// blobs/sha256/...), for nodes that cannot reach a registry.
absl::StatusOr<PulledImage> ImageCache::PullLayout(const PullRequest& req, Progress& progress) {
  std::string spec = req.image.substr(sizeof(kLayoutPrefix) - 1);
  std::string tag;
  if (const size_t colon = spec.rfind(':'); colon != std::string::npos &&
                                            spec.find('/', colon) == std::string::npos) {
    tag = spec.substr(colon + 1);
    spec = spec.substr(0, colon);
  }
  const std::string dir = spec;
  auto read_blob = [&](const std::string& digest) -> absl::StatusOr<std::string> {
    if (!IsDigest(digest)) {
      return absl::InvalidArgumentError(absl::StrCat(dir, ": unsupported digest ", digest));
    }
    auto data = ReadFile(absl::StrCat(dir, "/blobs/sha256/", Hex(digest)));
    if (data.ok() && Sha256::Of(*data) != digest) {
      return absl::DataLossError(absl::StrCat(dir, ": blob ", digest, " has the wrong content"));
    }
    return data;
  };
  auto index_text = ReadFile(dir + "/index.json");
  if (!index_text.ok()) {
    return index_text.status();
  }
  absl::StatusOr<std::string> chosen = LayoutManifest(*index_text, dir + "/index.json", tag);
  if (!chosen.ok()) {
    return chosen.status();
  }
  std::string manifest_digest = *chosen;
  if (manifest_digest.empty()) {
    return absl::NotFoundError(absl::StrCat(
        dir, ": no manifest ", tag.empty() ? "(give :TAG when the layout holds several)" : tag));
  }
  ResolvedImage image;
  for (int depth = 0; depth < 2; ++depth) {
    auto body = read_blob(manifest_digest);
    if (!body.ok()) {
      return body.status();
    }
    auto parsed = ParseManifest(*body, "", req.platform);
    if (!parsed.ok()) {
      return parsed.status();
    }
    if (parsed->chosen) {
      manifest_digest = parsed->chosen->digest;
      continue;
    }
    image = parsed->image;
    image.manifest_digest = manifest_digest;
    break;
  }
  if (image.manifest_digest.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": an index points to an index"));
  }
  const std::string tree = TreeDir(image.manifest_digest, req.keep_prefixes);
  std::error_code ec;
  if (fs::is_directory(tree, ec)) {
    return PulledImage{tree, image.manifest_digest, false, 0};
  }
  for (const auto& l : image.layers) {
    progress.total += l.size;
  }
  auto applied = ApplyLayers(
      tree, limits_, req.keep_prefixes, image,
      [&](const Descriptor& d, const std::function<absl::Status(const char*, size_t)>& sink) {
        std::ifstream in(absl::StrCat(dir, "/blobs/sha256/", Hex(d.digest)), std::ios::binary);
        if (!in) {
          return absl::NotFoundError(absl::StrCat(dir, ": blob ", d.digest, " missing"));
        }
        Sha256 hash;
        int64_t n = 0;
        char buf[1 << 16];
        while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
          const auto got = static_cast<size_t>(in.gcount());
          hash.Update(buf, got);
          n += static_cast<int64_t>(got);
          progress.done += static_cast<int64_t>(got);
          if (auto s = sink(buf, got); !s.ok()) {
            return s;
          }
        }
        if (n != d.size || hash.Digest() != d.digest) {
          return absl::DataLossError(absl::StrCat(dir, ": blob ", d.digest, " does not match its descriptor"));
        }
        return absl::OkStatus();
      });
  if (!applied.ok()) {
    return absl::Status(applied.code(), absl::StrCat(req.image, ": ", applied.message()));
  }
  return PulledImage{tree, image.manifest_digest, false, 0};
}

absl::StatusOr<std::vector<CacheEntry>> ImageCache::List() const {
  std::vector<CacheEntry> out;
  std::map<std::string, std::vector<std::string>> refs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root_ + "/refs", ec)) {
    auto text = ReadFile(e.path().string());
    if (!text.ok()) {
      continue;
    }
    refs[RecordField(*text, "tree")].push_back(RecordField(*text, "image"));
  }
  for (const auto& e : fs::directory_iterator(root_ + "/trees", ec)) {
    const std::string name = e.path().filename().string();
    if (IsStagingDirName(name)) {
      continue;
    }
    out.push_back(CacheEntry{name, e.path().string(), refs[e.path().string()]});
  }
  std::sort(out.begin(), out.end(), [](const CacheEntry& a, const CacheEntry& b) { return a.tree < b.tree; });
  return out;
}

absl::StatusOr<std::vector<std::string>> ImageCache::Prune(const std::set<std::string>& keep) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root_ + "/trees", ec)) {
    const std::string path = e.path().string();
    if (keep.count(path) != 0) {
      continue;
    }
    fs::remove_all(path, ec);
    if (ec) {
      return ErrnoStatus(ec.value(), "cannot remove", path);
    }
    removed.push_back(path);
  }
  for (const auto& e : fs::directory_iterator(root_ + "/refs", ec)) {
    auto text = ReadFile(e.path().string());
    bool stale = true;
    if (text.ok()) {
      stale = keep.count(RecordField(*text, "tree")) == 0;
    }
    if (stale) {
      fs::remove(e.path(), ec);
    }
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

}  // namespace kmodd::image

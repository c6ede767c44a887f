#include "controller/sign/image_signer.h"

#include <fnmatch.h>

#include <map>
#include <memory>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "common/oci/decompressor.h"
#include "common/oci/layer_path.h"
#include "common/oci/registry_http.h"
#include "common/oci/sha256.h"
#include "common/oci/tar_reader.h"
#include "common/value.h"
#include "controller/sign/layer_builder.h"

namespace kmodd::sign {

namespace {

bool Matches(const std::string& pattern, const std::string& path) {
  return fnmatch(pattern.c_str(), path.c_str(), FNM_PATHNAME) == 0;
}

// The files of the image's merged tree that `wanted` picks, with their bytes.
class Collector : public image::TarVisitor {
 public:
  struct File {
    std::string data;
    uint32_t mode = 0644;
  };

  Collector(std::function<bool(const std::string&)> wanted, uint64_t max_file_bytes)
      : wanted_(std::move(wanted)), max_(max_file_bytes) {}

  void StartLayer() { this_layer_.clear(); }

  absl::Status OnEntry(const image::TarEntry& e) override {
    reading_ = false;
    current_ = image::CleanArchivePath(e.path);
    if (current_.empty()) {
      return absl::OkStatus();
    }
    // The agent's whiteout rules (common/oci/layer_path.h); a malformed one removes nothing.
    const image::Whiteout w =
        image::ClassifyWhiteout(current_).value_or(image::Whiteout{image::Whiteout::kIgnore, ""});
    if (w.kind == image::Whiteout::kOpaque) {
      RemoveUnder(w.target);
    } else if (w.kind == image::Whiteout::kRemove) {
      files_.erase(w.target);
      links_.erase(w.target);
      RemoveUnder(w.target);
    }
    if (w.kind != image::Whiteout::kNone) {
      return absl::OkStatus();
    }
    this_layer_.insert(current_);
    files_.erase(current_);
    links_.erase(current_);
    if (!wanted_(current_)) {
      return absl::OkStatus();
    }
    switch (e.type) {
      case image::TarType::kRegular:
        if (e.size > max_) {
          return absl::ResourceExhaustedError(
              absl::StrCat("/", current_, " is ", e.size, " bytes, over the ", max_, "-byte limit for a module"));
        }
        files_[current_] = File{"", e.mode == 0 ? 0644u : e.mode};
        files_[current_].data.reserve(e.size);
        reading_ = true;
        break;
      case image::TarType::kHardlink:
        if (auto t = files_.find(image::CleanArchivePath(e.link)); t != files_.end()) {
          files_[current_] = t->second;
        }
        break;
      default:
        links_.insert(current_);  // a symlink or another kind: not signed in place
        break;
    }
    return absl::OkStatus();
  }
  absl::Status OnData(const char* data, size_t n) override {
    if (reading_) {
      files_[current_].data.append(data, n);
    }
    return absl::OkStatus();
  }
  absl::Status OnEntryEnd() override {
    reading_ = false;
    return absl::OkStatus();
  }

  std::map<std::string, File>& files() { return files_; }
  const std::set<std::string>& others() const { return links_; }

 private:
  void RemoveUnder(const std::string& dir) {
    const std::string prefix = dir.empty() ? "" : dir + "/";
    for (auto it = files_.lower_bound(prefix); it != files_.end() && absl::StartsWith(it->first, prefix);) {
      it = this_layer_.count(it->first) != 0 ? std::next(it) : files_.erase(it);
    }
    for (auto it = links_.lower_bound(prefix); it != links_.end() && absl::StartsWith(*it, prefix);) {
      it = this_layer_.count(*it) != 0 ? std::next(it) : links_.erase(it);
    }
  }

  std::function<bool(const std::string&)> wanted_;
  uint64_t max_;
  std::map<std::string, File> files_;
  std::set<std::string> links_;
  std::set<std::string> this_layer_;
  std::string current_;
  bool reading_ = false;
};

// The config with the new layer: rootfs.diff_ids and, when it has one, history.
absl::StatusOr<std::string> WithLayer(const std::string& config, const std::string& diff_id, size_t files) {
  absl::StatusOr<Value> v = ParseJson(config);
  if (!v.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("its config: ", v.status().message()));
  }
  if (!v->IsMap()) {
    return absl::InvalidArgumentError("its config is not a JSON object");
  }
  Value out = Value::EmptyMap();
  bool rootfs = false;
  for (const auto& [key, value] : v->AsMap()) {
    if (key == "rootfs") {
      const Value* ids = value.Find("diff_ids");
      if (ids == nullptr || !ids->IsList()) {
        return absl::InvalidArgumentError("its config's rootfs.diff_ids is not a list");
      }
      Value r = Value::EmptyMap();
      for (const auto& [k, x] : value.AsMap()) {
        if (k != "diff_ids") {
          r.Set(k, x);
        }
      }
      Value list = *ids;
      list.Append(diff_id);
      r.Set("diff_ids", std::move(list));
      out.Set(key, std::move(r));
      rootfs = true;
    } else if (key == "history" && value.IsList()) {
      Value h = value;
      Value entry = Value::EmptyMap();
      entry.Set("created_by", absl::StrCat("kmodd-controller sign: ", files, " kernel module",
                                           files == 1 ? "" : "s", " signed"));
      h.Append(std::move(entry));
      out.Set(key, std::move(h));
    } else {
      out.Set(key, value);
    }
  }
  if (!rootfs) {
    return absl::InvalidArgumentError("its config has no rootfs");
  }
  return ToJsonLine(out);
}

Value Descriptor(const std::string& media_type, const std::string& digest, int64_t size) {
  Value d = Value::EmptyMap();
  d.Set("mediaType", media_type);
  d.Set("digest", digest);
  d.Set("size", size);
  return d;
}

}  // namespace

absl::StatusOr<SignImageResult> SignImage(const SignImageRequest& req) {
  if (req.key == nullptr) {
    return absl::InvalidArgumentError("no signing key");
  }
  auto from_http = image::NewRegistryHttpClient(req.unsigned_options);
  auto to_http = image::NewRegistryHttpClient(req.signed_options);
  if (!from_http.ok() || !to_http.ok()) {
    return (!from_http.ok() ? from_http : to_http).status();
  }
  const std::string from_name = req.unsigned_image.ToString();
  const std::string to_name = req.signed_image.ToString();
  image::RegistryClient from(**from_http, req.unsigned_options);
  absl::StatusOr<image::ResolvedImage> img = from.Resolve(req.unsigned_image, req.platform);
  if (!img.ok()) {
    return absl::Status(img.status().code(), absl::StrCat("unsignedImage ", from_name, ": ", img.status().message()));
  }
  std::vector<std::string> patterns;
  for (const std::string& f : req.files_to_sign) {
    patterns.push_back(image::CleanArchivePath(f));
  }
  const std::string dir = image::CleanArchivePath(req.modules_dir) + "/";
  Collector collector(
      [&](const std::string& path) {
        if (req.all_modules) {
          return absl::StartsWith(path, dir) && absl::EndsWith(path, ".ko");
        }
        for (const std::string& p : patterns) {
          if (Matches(p, path)) {
            return true;
          }
        }
        return false;
      },
      req.max_file_bytes);
  for (size_t i = 0; i < img->layers.size(); ++i) {
    const image::Descriptor& layer = img->layers[i];
    const std::string what = absl::StrCat("unsignedImage ", from_name, " layer ", i + 1, " (",
                                          layer.digest.substr(0, 19), ")");
    absl::StatusOr<image::Compression> c = image::LayerCompression(layer.media_type);
    if (!c.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", c.status().message()));
    }
    std::unique_ptr<image::Decompressor> dec = image::NewDecompressor(*c);
    image::TarReader tar(collector);
    collector.StartLayer();
    auto sink = [&](const char* p, size_t k) { return tar.Feed(p, k); };
    absl::Status s = from.FetchBlob(req.unsigned_image, layer,
                                    [&](const char* p, size_t k) { return dec->Feed(p, k, sink); });
    if (s.ok()) {
      s = dec->Finish(sink);
    }
    if (s.ok()) {
      s = tar.Finish();
    }
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
    }
  }
  // Every pattern names something; nothing named is a symlink or a device.
  if (!collector.others().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unsignedImage ", from_name, ": /", *collector.others().begin(),
        " is not a regular file (a symlink?): list the file it stands for in filesToSign"));
  }
  if (!req.all_modules) {
    for (size_t i = 0; i < patterns.size(); ++i) {
      bool any = false;
      for (const auto& [path, f] : collector.files()) {
        any = any || Matches(patterns[i], path);
      }
      if (!any) {
        return absl::NotFoundError(absl::StrCat("filesToSign[", i, "] \"", req.files_to_sign[i],
                                                "\" matches no file in unsignedImage ", from_name));
      }
    }
  } else if (collector.files().empty()) {
    return absl::NotFoundError(
        absl::StrCat("unsignedImage ", from_name, " has no .ko under /", dir, ": nothing to sign"));
  }
  SignImageResult result;
  std::vector<LayerFile> signed_files;
  for (auto& [path, f] : collector.files()) {
    if (f.data.compare(0, 4, "\x7f" "ELF") != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("unsignedImage ", from_name, ": /", path, " is not a kernel module (not ELF)"));
    }
    absl::StatusOr<std::string> s = SignModule(f.data, *req.key);
    if (!s.ok()) {
      return absl::Status(s.status().code(), absl::StrCat("signing /", path, ": ", s.status().message()));
    }
    signed_files.push_back(LayerFile{path, std::move(*s), f.mode});
    result.signed_files.push_back("/" + path);
  }
  absl::StatusOr<BuiltLayer> layer = BuildLayer(signed_files);
  if (!layer.ok()) {
    return layer.status();
  }
  std::string config;
  if (absl::Status s = from.FetchBlob(req.unsigned_image, img->config, [&](const char* p, size_t k) {
        config.append(p, k);
        return absl::OkStatus();
      });
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("unsignedImage ", from_name, " config: ", s.message()));
  }
  absl::StatusOr<std::string> new_config = WithLayer(config, layer->diff_id, signed_files.size());
  if (!new_config.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("unsignedImage ", from_name, ": ", new_config.status().message()));
  }

  image::RegistryClient to(**to_http, req.signed_options);
  const bool same_registry = req.unsigned_image.ApiHost() == req.signed_image.ApiHost();
  for (const image::Descriptor& base : img->layers) {
    absl::StatusOr<std::optional<image::RegistryClient::BlobPush>> mounted =
        to.MountBlob(req.signed_image, base.digest, same_registry ? req.unsigned_image.repository : "");
    if (!mounted.ok()) {
      return absl::Status(mounted.status().code(), absl::StrCat(to_name, ": ", mounted.status().message()));
    }
    if (mounted->has_value()) {
      ++result.base_layers_mounted;
      continue;
    }
    std::string bytes;
    if (absl::Status s = from.FetchBlob(req.unsigned_image, base, [&](const char* p, size_t k) {
          bytes.append(p, k);
          return absl::OkStatus();
        });
        !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("unsignedImage ", from_name, ": ", s.message()));
    }
    image::RegistryClient::PushBlobOptions chunks;
    chunks.chunk_bytes = size_t{16} << 20;
    if (auto pushed = to.PushBlob(req.signed_image, bytes, base.digest, chunks); !pushed.ok()) {
      return absl::Status(pushed.status().code(), absl::StrCat(to_name, ": ", pushed.status().message()));
    }
  }
  const bool oci = img->media_type == image::kOciManifest;
  const std::string layer_type = oci ? "application/vnd.oci.image.layer.v1.tar+gzip"
                                     : "application/vnd.docker.image.rootfs.diff.tar.gzip";
  const std::string config_digest = image::Sha256::Of(*new_config);
  for (const auto& [data, digest] : {std::pair<const std::string&, const std::string&>{layer->gzip, layer->digest},
                                     {*new_config, config_digest}}) {
    if (auto pushed = to.PushBlob(req.signed_image, data, digest, {}); !pushed.ok()) {
      return absl::Status(pushed.status().code(), absl::StrCat(to_name, ": ", pushed.status().message()));
    }
  }
  Value manifest = Value::EmptyMap();
  manifest.Set("schemaVersion", 2);
  manifest.Set("mediaType", img->media_type);
  manifest.Set("config", Descriptor(img->config.media_type, config_digest,
                                    static_cast<int64_t>(new_config->size())));
  Value layers = Value::EmptyList();
  for (const image::Descriptor& base : img->layers) {
    layers.Append(Descriptor(base.media_type, base.digest, base.size));
  }
  layers.Append(Descriptor(layer_type, layer->digest, static_cast<int64_t>(layer->gzip.size())));
  manifest.Set("layers", std::move(layers));
  absl::StatusOr<std::string> digest = to.PushManifest(req.signed_image, img->media_type, ToJsonLine(manifest));
  if (!digest.ok()) {
    return absl::Status(digest.status().code(), absl::StrCat(to_name, ": ", digest.status().message()));
  }
  result.manifest_digest = *digest;
  result.bytes_fetched = from.blob_bytes_received();
  result.bytes_pushed = to.blob_bytes_sent();
  return result;
}

}  // namespace kmodd::sign

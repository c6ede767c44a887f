#include "controller/preflight/preflight.h"

#include <algorithm>
#include <memory>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file.h"
#include "common/oci/decompressor.h"
#include "common/oci/layer_path.h"
#include "common/oci/pull_secret.h"
#include "common/oci/reference.h"
#include "common/oci/registry_client.h"
#include "common/oci/registry_http.h"
#include "common/oci/tar_reader.h"
#include "controller/placement/mapping.h"

namespace kmodd::preflight {

namespace {

std::string Canonical(std::string_view name) {
  std::string n(name);
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

bool IsModuleFile(std::string_view path) {
  return path.ends_with(".ko") || path.ends_with(".ko.xz") || path.ends_with(".ko.zst") ||
         path.ends_with(".ko.gz");
}



}  // namespace

std::string KernelDir(const Expectations& want) {
  std::string dir = image::CleanArchivePath(want.dir_name.empty() ? "/opt" : want.dir_name);
  return absl::StrCat(dir, dir.empty() ? "" : "/", "lib/modules/", want.kernel, "/");
}

ContentVerdict CheckContent(const Expectations& want, const ImageTree& tree) {
  ContentVerdict v;
  std::vector<std::string> problems;
  const std::string dir = KernelDir(want);
  const std::string shown = "/" + dir;
  std::map<std::string, std::string> modules;  // name -> path
  std::map<std::string, const ModInfo*> infos;
  bool any = false;
  for (auto it = tree.lower_bound(dir.substr(0, dir.size() - 1)); it != tree.end(); ++it) {
    const std::string& path = it->first;
    if (path != dir.substr(0, dir.size() - 1) && !absl::StartsWith(path, dir)) {
      if (path > dir) {
        break;
      }
      continue;
    }
    any = true;
    if (!it->second.modinfo) {
      continue;
    }
    const std::string where = "/" + path;
    if (!it->second.modinfo->ok()) {
      problems.push_back(absl::StrCat(where, ": ", it->second.modinfo->status().message()));
      continue;
    }
    const ModInfo& info = **it->second.modinfo;
    const std::string name = Canonical(info.name.empty() ? ModuleNameFromPath(path) : info.name);
    if (auto [at, fresh] = modules.emplace(name, path); !fresh) {
      problems.push_back(absl::StrCat("two files for module ", name, ": /", at->second, " and ",
                                      where, " (the agent refuses a tree with both)"));
      continue;
    }
    infos[name] = &info;
    if (info.Release() != want.kernel) {
      problems.push_back(absl::StrCat(where, ": its vermagic \"", info.vermagic, "\" is for kernel ",
                                      info.Release().empty() ? "(none)" : std::string(info.Release()),
                                      ", not ", want.kernel));
    }
    auto flags = [](std::string_view vermagic) {
      while (!vermagic.empty() && vermagic.back() == ' ') {
        vermagic.remove_suffix(1);
      }
      const size_t space = vermagic.find(' ');
      return space == std::string_view::npos ? std::string_view() : vermagic.substr(space + 1);
    };
    if (info.Release() == want.kernel && !want.kernel_vermagic.empty() &&
        flags(info.vermagic) != flags(want.kernel_vermagic)) {
      problems.push_back(absl::StrCat(where, ": its vermagic \"", info.vermagic, "\" differs from kernel ",
                                      want.kernel, "'s \"", want.kernel_vermagic,
                                      "\" (the kernel refuses to load it)"));
    }
    if (want.signed_required && !info.has_signature) {
      problems.push_back(absl::StrCat(where, " is not signed, and the Module signs (sign)"));
    }
  }
  if (!any) {
    // Say which kernels the image does have, so that a mapping typo shows.
    const std::string parent = dir.substr(0, dir.size() - want.kernel.size() - 1);
    std::set<std::string> kernels;
    for (auto it = tree.lower_bound(parent); it != tree.end() && absl::StartsWith(it->first, parent); ++it) {
      kernels.insert(it->first.substr(parent.size(), it->first.find('/', parent.size()) - parent.size()));
    }
    v.reason = absl::StrCat("the image has no ", shown, " (",
                            kernels.empty() ? absl::StrCat("nor any /", parent)
                                            : absl::StrCat("it has /", parent, " for ", absl::StrJoin(kernels, ", ")),
                            "): it was not built for kernel ", want.kernel);
    return v;
  }
  std::vector<std::string> names;
  names.reserve(modules.size());
  for (const auto& [name, path] : modules) {
    names.push_back(name);
  }
  v.notes.push_back(absl::StrCat(modules.size(), " module", modules.size() == 1 ? "" : "s", " in ",
                                 shown, names.empty() ? "" : ": ", absl::StrJoin(names, ", ")));
  std::vector<std::string> required;
  if (!want.module_name.empty()) {
    required.push_back(want.module_name);
  }
  required.insert(required.end(), want.loading_order.begin(), want.loading_order.end());
  for (const std::string& r : required) {
    if (modules.count(Canonical(r)) == 0) {
      problems.push_back(absl::StrCat(r == want.module_name ? "moduleName " : "modulesLoadingOrder module ",
                                      r, " is not in ", shown));
    }
  }
  std::set<std::string> from_kernel;
  for (const auto& [name, info] : infos) {
    for (const std::string& raw : info->depends) {
      const std::string dep = Canonical(raw);
      if (modules.count(dep) != 0) {
        continue;
      }
      if (want.kernel_modules && want.kernel_modules->count(dep) == 0) {
        problems.push_back(absl::StrCat(name, " depends on ", dep, ", which neither the image nor kernel ",
                                        want.kernel, "'s own modules hold"));
      } else {
        from_kernel.insert(dep);
      }
    }
  }
  if (!from_kernel.empty()) {
    v.notes.push_back(absl::StrCat(
        "from the kernel's own modules: ", absl::StrJoin(from_kernel, ", "),
        want.kernel_modules ? " (found in its tree)" : " (not checked: no module tree of the kernel was given)"));
  }
  if (!want.firmware_path.empty()) {
    const std::string fw = image::CleanArchivePath(want.firmware_path);
    auto it = tree.lower_bound(fw);
    const bool found = it != tree.end() && (it->first == fw || absl::StartsWith(it->first, fw + "/"));
    if (!found) {
      problems.push_back(absl::StrCat("firmwarePath /", fw, " is not in the image"));
    } else {
      v.notes.push_back(absl::StrCat("firmwarePath /", fw, " is there"));
    }
  }
  if (want.signed_required && problems.empty()) {
    v.notes.push_back("every module is signed");
  }
  v.ok = problems.empty();
  v.reason = v.ok ? absl::StrCat("the image holds a driver for kernel ", want.kernel)
                  : absl::StrJoin(problems, "; ");
  return v;
}

TreeBuilder::TreeBuilder(std::string keep_prefix, uint64_t max_module_bytes)
    : keep_prefix_(std::move(keep_prefix)), max_module_bytes_(max_module_bytes) {}

void TreeBuilder::StartLayer(LayerRecord* record) {
  this_layer_.clear();
  record_ = record;
}

void TreeBuilder::Replay(const LayerRecord& record) {
  StartLayer(nullptr);
  replaying_ = true;
  for (const LayerEvent& ev : record) {
    (void)OnEntry(ev.entry);  // never fails
    reading_ = false;
    if (ev.modinfo && !current_.empty()) {
      tree_[current_].modinfo = ev.modinfo;
    }
  }
  replaying_ = false;
}

void TreeBuilder::Remove(const std::string& path, bool children_only) {
  if (!children_only) {
    tree_.erase(path);
  }
  const std::string prefix = path.empty() ? std::string() : path + "/";
  for (auto it = tree_.lower_bound(prefix); it != tree_.end() && absl::StartsWith(it->first, prefix);) {
    it = this_layer_.count(it->first) != 0 ? std::next(it) : tree_.erase(it);
  }
}

absl::Status TreeBuilder::OnEntry(const image::TarEntry& entry) {
  reading_ = false;
  if (record_ != nullptr) {
    record_->push_back(LayerEvent{entry, std::nullopt});
  }
  current_ = image::CleanArchivePath(entry.path);
  if (current_.empty()) {
    return absl::OkStatus();
  }
  // The agent's whiteout rules (common/oci/layer_path.h); a malformed one removes nothing.
  const image::Whiteout w = image::ClassifyWhiteout(current_).value_or(image::Whiteout{image::Whiteout::kIgnore, ""});
  if (w.kind != image::Whiteout::kNone) {
    if (w.kind == image::Whiteout::kOpaque) {
      Remove(w.target, /*children_only=*/true);  // the lower layers' content of the directory goes
    } else if (w.kind == image::Whiteout::kRemove) {
      Remove(w.target, false);
    }
    current_.clear();
    return absl::OkStatus();
  }
  if (entry.type != image::TarType::kDirectory) {
    Remove(current_, /*children_only=*/true);  // a file replaces a directory and what it held
  }
  ImageFile f;
  f.type = entry.type;
  f.size = entry.size;
  if (entry.type == image::TarType::kHardlink) {
    if (auto target = tree_.find(image::CleanArchivePath(entry.link)); target != tree_.end()) {
      f = target->second;
    }
  }
  const bool module = absl::StartsWith(current_, keep_prefix_) && IsModuleFile(current_);
  if (module && entry.type == image::TarType::kRegular) {
    if (!absl::EndsWith(current_, ".ko")) {
      f.modinfo = absl::StatusOr<ModInfo>(absl::UnimplementedError(
          "a compressed module: preflight reads uncompressed .ko files only"));
    } else if (entry.size > max_module_bytes_) {
      f.modinfo = absl::StatusOr<ModInfo>(absl::ResourceExhaustedError(
          absl::StrCat("larger than ", max_module_bytes_, " bytes: not read")));
    } else if (!replaying_) {
      reading_ = true;
      data_.clear();
      data_.reserve(entry.size);
    }
    if (record_ != nullptr) {
      record_->back().modinfo = f.modinfo;
    }
  }
  tree_[current_] = std::move(f);
  this_layer_.insert(current_);
  return absl::OkStatus();
}

absl::Status TreeBuilder::OnData(const char* data, size_t n) {
  if (reading_) {
    data_.append(data, n);
  }
  return absl::OkStatus();
}

absl::Status TreeBuilder::OnEntryEnd() {
  if (reading_) {
    tree_[current_].modinfo = ReadModInfo(data_);
    if (record_ != nullptr) {
      record_->back().modinfo = tree_[current_].modinfo;
    }
    reading_ = false;
    data_.clear();
    data_.shrink_to_fit();
  }
  return absl::OkStatus();
}

std::set<std::string> KernelModuleNames(const std::string& modules_dep, const std::string& modules_builtin) {
  std::set<std::string> names;
  std::istringstream dep(modules_dep);
  std::string line;
  while (std::getline(dep, line)) {
    const std::string path = line.substr(0, line.find(':'));
    if (IsModuleFile(path)) {
      names.insert(Canonical(ModuleNameFromPath(path)));
    }
  }
  std::istringstream builtin(modules_builtin);
  while (std::getline(builtin, line)) {
    if (IsModuleFile(line)) {
      names.insert(Canonical(ModuleNameFromPath(line)));
    }
  }
  return names;
}

absl::StatusOr<KernelTree> ReadKernelTree(const std::string& dir) {
  auto read = [](const std::string& path) -> std::optional<std::string> {
    absl::StatusOr<std::string> text = ReadFile(path);
    return text.ok() ? std::optional<std::string>(*std::move(text)) : std::nullopt;
  };
  std::optional<std::string> dep = read(dir + "/modules.dep");
  if (!dep) {
    return absl::NotFoundError(absl::StrCat(dir, "/modules.dep cannot be read: not a kernel's module tree"));
  }
  KernelTree t;
  t.modules = KernelModuleNames(*dep, read(dir + "/modules.builtin").value_or(""));
  std::istringstream lines(*dep);
  std::string line;
  while (t.vermagic.empty() && std::getline(lines, line)) {
    const std::string path = line.substr(0, line.find(':'));
    if (!absl::EndsWith(path, ".ko")) {
      continue;
    }
    std::optional<std::string> ko = read(absl::StrCat(dir, "/", path));
    if (!ko) {
      continue;
    }
    absl::StatusOr<ModInfo> info = ReadModInfo(*ko);
    if (!info.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(dir, "/", path, ": ", info.status().message()));
    }
    t.vermagic = info->vermagic;
  }
  return t;
}

namespace {

// Layers already read in this run, by digest and kept prefix.
using LayerCache = std::map<std::string, TreeBuilder::LayerRecord>;

Result Check(const api::Module& m, const Options& options, LayerCache& cache) {
  Result r;
  r.module = absl::StrCat(m.metadata.namespace_, "/", m.metadata.name);
  r.stage = "Mapping";
  placement::CompiledModule cm(m);
  const api::ModuleLoaderContainerSpec* loader = cm.loader();
  if (loader == nullptr) {
    r.reason = "the Module has no spec.moduleLoader: nothing to load on any kernel";
    return r;
  }
  absl::StatusOr<std::optional<placement::CompiledModule::KernelPlan>> plan = cm.PlanFor(options.kernel);
  if (!plan.ok()) {
    r.reason = std::string(plan.status().message());
    return r;
  }
  if (!plan->has_value()) {
    r.reason = absl::StrCat("no kernelMapping matches kernel ", options.kernel,
                            ": nodes on it would get no driver");
    return r;
  }
  const placement::ResolvedConfig& config = (*plan)->config;
  r.image = config.container_image;
  const bool has_build = (*plan)->build.has_value();
  const bool has_sign = (*plan)->sign.has_value();

  r.stage = "Image";
  absl::StatusOr<image::ImageRef> ref = image::ParseImageRef(config.container_image);
  if (!ref.ok()) {
    r.reason = absl::StrCat("containerImage \"", config.container_image, "\": ", ref.status().message());
    return r;
  }
  image::RegistryOptions ro;
  ro.plain_http = config.registry_tls.insecure;
  ro.skip_tls_verify = config.registry_tls.insecure_skip_tls_verify;
  ro.ca_file = options.ca_file;
  ro.attempts = 2;
  if (!options.docker_config.empty()) {
    auto creds = image::CredentialsFor(options.docker_config, ref->registry);
    if (!creds.ok()) {
      r.reason = absl::StrCat("--docker-config: ", creds.status().message());
      return r;
    }
    ro.credentials = *creds;
  }
  absl::StatusOr<std::unique_ptr<http::HttpClient>> http = image::NewRegistryHttpClient(ro);
  if (!http.ok()) {
    r.reason = absl::StrCat("no HTTP client for ", ref->ApiHost(), ": ", http.status().message());
    return r;
  }
  image::RegistryClient registry(**http, ro);
  absl::StatusOr<image::ResolvedImage> img = registry.Resolve(*ref, image::Platform{});
  if (!img.ok()) {
    if (absl::IsNotFound(img.status())) {
      r.reason = absl::StrCat(
          "image ", config.container_image, " is not in its registry",
          has_build ? "; the Module has build, which this kmodd does not run: build and push the "
                      "image, then run preflight again"
                    : ", and the Module has no build to make it");
    } else {
      r.reason = absl::StrCat("image ", config.container_image, ": ", img.status().message());
    }
    return r;
  }
  r.digest = img->manifest_digest;
  for (const image::Descriptor& l : img->layers) {
    r.image_bytes += l.size;
  }

  r.stage = "Content";
  Expectations want;
  want.kernel = config.kernel_version;
  want.dir_name = config.modprobe.EffectiveDirName();
  want.module_name = config.modprobe.module_name;
  want.loading_order = config.modprobe.modules_loading_order.value_or(std::vector<std::string>{});
  want.firmware_path = config.modprobe.firmware_path;
  want.signed_required = has_sign;
  want.kernel_modules = options.kernel_modules;
  want.kernel_vermagic = options.kernel_vermagic;
  const std::string builder_prefix = KernelDir(want);
  TreeBuilder builder(builder_prefix, options.max_module_bytes);
  int64_t done = 0;
  for (size_t i = 0; i < img->layers.size(); ++i) {
    const image::Descriptor& layer = img->layers[i];
    const std::string what = absl::StrCat("layer ", i + 1, " of ", img->layers.size(), " (",
                                          layer.digest.substr(0, 19), ")");
    const std::string cache_key = absl::StrCat(layer.digest, "\n", builder_prefix);
    if (auto hit = cache.find(cache_key); hit != cache.end()) {
      builder.Replay(hit->second);
      done += layer.size;
      continue;
    }
    absl::StatusOr<image::Compression> c = image::LayerCompression(layer.media_type);
    if (!c.ok()) {
      r.reason = absl::StrCat(what, ": ", c.status().message());
      return r;
    }
    std::unique_ptr<image::Decompressor> dec = image::NewDecompressor(*c);
    image::TarReader tar(builder);
    TreeBuilder::LayerRecord record;
    builder.StartLayer(&record);
    int64_t got = 0;
    int64_t shown = 0;
    auto sink = [&](const char* p, size_t k) { return tar.Feed(p, k); };
    absl::Status s = registry.FetchBlob(*ref, layer, [&](const char* p, size_t k) -> absl::Status {
      got += static_cast<int64_t>(k);
      if (options.progress && got - shown >= (int64_t{4} << 20)) {
        shown = got;
        options.progress(r.module, done + got, r.image_bytes);
      }
      return dec->Feed(p, k, sink);
    });
    if (s.ok()) {
      s = dec->Finish(sink);
    }
    if (s.ok()) {
      s = tar.Finish();
    }
    if (!s.ok()) {
      r.reason = absl::StrCat(what, ": ", s.message());
      r.bytes_fetched = registry.blob_bytes_received();
      return r;
    }
    cache[cache_key] = std::move(record);
    done += layer.size;
    if (options.progress) {
      options.progress(r.module, done, r.image_bytes);
    }
  }
  r.bytes_fetched = registry.blob_bytes_received();
  ContentVerdict v = CheckContent(want, builder.Take());
  r.notes = std::move(v.notes);
  r.reason = std::move(v.reason);
  if (!v.ok) {
    return r;
  }
  r.stage = "Done";
  r.success = true;
  return r;
}

}  // namespace

std::vector<Result> Preflight(const std::vector<api::Module>& modules, const Options& options) {
  std::vector<Result> out;
  out.reserve(modules.size());
  LayerCache cache;
  for (const api::Module& m : modules) {
    out.push_back(Check(m, options, cache));
  }
  return out;
}

}  // namespace kmodd::preflight
